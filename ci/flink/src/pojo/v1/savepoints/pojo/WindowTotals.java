package savepoints.pojo;

/**
 * The accumulator of the window job's tumbling-window aggregate (ci/flink/src/savepoints/WindowJobs.java),
 * version 1; version 2 (ci/flink/src/pojo/v2) is the same class with one more field. Like
 * {@link Profile}, one class name compiled twice: the class path of a run picks the version.
 */
public class WindowTotals {
    public long count;
    public long sum;
    public String last;

    public WindowTotals() {}
}

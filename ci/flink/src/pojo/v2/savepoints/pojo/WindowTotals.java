package savepoints.pojo;

/**
 * The window job's accumulator, version 2: version 1 plus {@code max}, a primitive long. The job
 * never writes it (it knows version 1's fields only), so after a migration it keeps what the
 * migration left in it: 0 when Flink migrates on restore (the no-arg constructor's value).
 */
public class WindowTotals {
    public long count;
    public long sum;
    public String last;
    public long max;

    public WindowTotals() {}
}

package savepoints.pojo;

/**
 * The POJO the POJO job keeps in keyed state, version 2: version 1 (ci/flink/src/pojo/v1) plus
 * {@code score}, a primitive double. Flink migrates a version-1 value on restore by reading the
 * old fields into a new instance, so {@code score} keeps what the no-arg constructor left: 0.0.
 */
public class Profile {
    public long id;
    public String name;
    public int count;
    public double score;

    public Profile() {}
}

package savepoints.pojo;

/**
 * The POJO the POJO job keeps in keyed state, version 1. Version 2 (ci/flink/src/pojo/v2) is the
 * same class with one more field: Flink knows a POJO by its class name, so the two versions are
 * one class compiled twice into two directories, and the class path of a run picks the version.
 * The job code ({@code savepoints.PojoJobs}) is compiled against this version and touches the
 * added field only by reflection.
 */
public class Profile {
    public long id;
    public String name;
    public int count;

    public Profile() {}
}

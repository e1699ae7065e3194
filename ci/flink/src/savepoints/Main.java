package savepoints;

import java.nio.file.Path;

/**
 * Entry point; one JVM runs several jobs in a row (JVM start-up and class loading dominate a
 * small job, so batching them keeps the Flink part of CI short).
 *
 * <pre>
 *   Main generate WORK SPEC OUTDIR [SPEC OUTDIR ...]
 *   Main restore  WORK SAVEPOINT SPEC OUT.jsonl [SAVEPOINT SPEC OUT.jsonl ...]
 *   Main restore-timed WORK SAVEPOINT SPEC PROBE_KEYS [STRIDE OUT.jsonl]     (see {@link RestoreTimed})
 * </pre>
 *
 * WORK is a scratch directory (the caller's private java.io.tmpdir is a good choice); each job
 * gets a fresh subdirectory, deleted afterwards. A restore Flink refuses writes
 * {@code OUT.jsonl.error} (JSON: exception, message, chain) instead of OUT.jsonl, prints
 * {@code restore failed: ...} on stderr and makes the exit code 3 once every item has run; any
 * other error stops the run with exit code 1.
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            usage();
        }
        Path work = Path.of(args[1]);
        int failed = 0;
        if (Batch.is(args, "generate", 2)) {
            Batch.generate(args, work, (spec, out, w) -> Generate.run(Spec.read(spec), out, w));
        } else if (Batch.is(args, "restore", 3)) {
            failed = Batch.restore(args, work, (sp, spec, out, w) -> Restore.run(sp, Spec.read(spec), out, w));
        } else if (args[0].equals("restore-timed") && (args.length == 5 || args.length == 7)) {
            failed = Batch.single(work, w -> {
                if (args.length == 7) {
                    RestoreTimed.run(Path.of(args[2]), Spec.read(Path.of(args[3])), Long.parseLong(args[4]),
                            Long.parseLong(args[5]), Path.of(args[6]), w);
                } else {
                    RestoreTimed.run(Path.of(args[2]), Spec.read(Path.of(args[3])), Long.parseLong(args[4]), w);
                }
            });
        } else {
            usage();
        }
        System.exit(failed == 0 ? 0 : 3);
    }

    private static void usage() {
        Batch.usage("Main", "\n       Main restore-timed WORK SAVEPOINT SPEC PROBE_KEYS [STRIDE OUT.jsonl]");
    }
}

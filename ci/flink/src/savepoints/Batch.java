package savepoints;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The batch loops every program's {@code main} shares: one JVM runs
 * {@code generate WORK SPEC OUTDIR [...]} or {@code restore WORK SAVEPOINT SPEC OUT.jsonl [...]},
 * each job in its own work directory under WORK, deleted afterwards. A restore Flink refuses writes
 * {@code OUT.jsonl.error} (JSON: exception, message, chain) instead of OUT.jsonl and prints
 * {@code restore failed: ...} on stderr; the caller turns the count of those into exit code 3.
 */
final class Batch {
    private Batch() {}

    interface Generator {
        void run(Path spec, Path out, Path work) throws Exception;
    }

    interface Restorer {
        void run(Path savepoint, Path spec, Path out, Path work) throws Exception;
    }

    interface Single {
        void run(Path work) throws Exception;
    }

    /**
     * The whole {@code main} of a program whose verbs are the two batches: {@code generate} and
     * {@code restore}; exit 2 with the usage on bad arguments, 3 when Flink refused a restore.
     */
    static void program(String name, String[] args, Generator generate, Restorer restore) throws Exception {
        int failed = 0;
        if (is(args, "generate", 2)) {
            generate(args, Path.of(args[1]), generate);
        } else if (is(args, "restore", 3)) {
            failed = restore(args, Path.of(args[1]), restore);
        } else {
            usage(name, "");
        }
        System.exit(failed == 0 ? 0 : 3);
    }

    /** Prints the two batch verbs' usage of program {@code name} and {@code more} lines, then exits 2. */
    static void usage(String name, String more) {
        System.err.println("usage: " + name + " generate WORK SPEC OUTDIR [SPEC OUTDIR ...]\n"
                + "       " + name + " restore WORK SAVEPOINT SPEC OUT.jsonl [SAVEPOINT SPEC OUT.jsonl ...]" + more);
        System.exit(2);
    }

    /** Whether {@code args} (verb, WORK, then groups of {@code group}) is a well-formed batch of {@code verb}. */
    static boolean is(String[] args, String verb, int group) {
        return args.length > 2 && args[0].equals(verb) && (args.length - 2) % group == 0;
    }

    static void generate(String[] args, Path work, Generator job) throws Exception {
        for (int k = 2; k < args.length; k += 2) {
            Path w = work.resolve("job-" + k);
            try {
                job.run(Path.of(args[k]), Path.of(args[k + 1]), w);
            } finally {
                Generate.deleteTree(w);
            }
            System.err.println("generated " + args[k] + " -> " + args[k + 1]);
        }
    }

    /** Runs every restore of the batch; returns how many Flink refused. */
    static int restore(String[] args, Path work, Restorer job) throws Exception {
        int failed = 0;
        for (int k = 2; k < args.length; k += 3) {
            Path out = Path.of(args[k + 2]);
            Path err = Path.of(args[k + 2] + ".error");
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
            Path w = work.resolve("job-" + k);
            try {
                job.run(Path.of(args[k]), Path.of(args[k + 1]), out, w);
                System.err.println("restored " + args[k + 1] + " from " + args[k]);
            } catch (Restore.Failure f) {
                failed++;
                Files.write(err, (f.toJson() + "\n").getBytes(StandardCharsets.UTF_8));
                System.err.println("restore failed: " + args[k + 1] + ": " + f.root);
            } finally {
                Generate.deleteTree(w);
            }
        }
        return failed;
    }

    /** One job of a verb that is no batch (restore-timed, restore-savepoint): 1 if Flink refused it, else 0. */
    static int single(Path work, Single job) throws Exception {
        Path w = work.resolve("job-single");
        try {
            job.run(w);
            return 0;
        } catch (Restore.Failure f) {
            System.err.println("restore failed: " + f.root);
            return 1;
        } finally {
            Generate.deleteTree(w);
        }
    }
}

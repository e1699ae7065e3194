package savepoints;

import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Queue;

/**
 * The numbers {@code from..to}, then idle forever: an unbounded source that never ends its input.
 *
 * <p>A bounded source would finish the job (and fire every timer with the final watermark) before
 * the savepoint could be taken; this one emits everything and then waits, so the generator can
 * take the savepoint once every record is processed, with timers still pending. Its enumerator
 * hands out the splits and then simply never says "no more splits".
 */
final class IdleSequenceSource extends NumberSequenceSource {
    private static final long serialVersionUID = 1L;

    IdleSequenceSource(long from, long to) {
        super(from, to);
    }

    @Override
    public Boundedness getBoundedness() {
        return Boundedness.CONTINUOUS_UNBOUNDED;
    }

    @Override
    public SplitEnumerator<NumberSequenceSplit, Collection<NumberSequenceSplit>> createEnumerator(
            SplitEnumeratorContext<NumberSequenceSplit> ctx) {
        return new Enumerator(ctx, splitNumberRange(getFrom(), getTo(), ctx.currentParallelism()));
    }

    @Override
    public SplitEnumerator<NumberSequenceSplit, Collection<NumberSequenceSplit>> restoreEnumerator(
            SplitEnumeratorContext<NumberSequenceSplit> ctx, Collection<NumberSequenceSplit> checkpoint) {
        return new Enumerator(ctx, checkpoint);
    }

    private static final class Enumerator implements SplitEnumerator<NumberSequenceSplit, Collection<NumberSequenceSplit>> {
        private final SplitEnumeratorContext<NumberSequenceSplit> ctx;
        private final Queue<NumberSequenceSplit> remaining;

        Enumerator(SplitEnumeratorContext<NumberSequenceSplit> ctx, Collection<NumberSequenceSplit> splits) {
            this.ctx = ctx;
            this.remaining = new ArrayDeque<>(splits);
        }

        @Override
        public void start() {}

        @Override
        public void handleSplitRequest(int subtask, String host) {
            NumberSequenceSplit s = remaining.poll();
            if (s != null) {
                ctx.assignSplit(s, subtask);
            } // else: stay idle, never signal the end of input
        }

        @Override
        public void addSplitsBack(List<NumberSequenceSplit> splits, int subtask) {
            remaining.addAll(splits);
        }

        @Override
        public void addReader(int subtask) {}

        @Override
        public Collection<NumberSequenceSplit> snapshotState(long checkpointId) {
            return new ArrayList<>(remaining);
        }

        @Override
        public void close() {}
    }
}

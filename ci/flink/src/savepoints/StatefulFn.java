package savepoints;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;

/** The stateful operator's function, as both jobs open it: the spec's states, registered in open(). */
abstract class StatefulFn extends KeyedProcessFunction<Object, Long, String> {
    private static final long serialVersionUID = 1L;
    protected final Spec spec;
    protected transient StateSet states;

    StatefulFn(Spec spec) {
        this.spec = spec;
    }

    @Override
    public void open(OpenContext ctx) {
        states = new StateSet(spec, Job.rowType(spec.eventsType));
        states.open(getRuntimeContext());
    }
}

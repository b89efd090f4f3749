package taskhub.driver;

import io.dapr.durabletask.RetryPolicy;
import io.dapr.durabletask.Task;
import io.dapr.durabletask.TaskCanceledException;
import io.dapr.durabletask.TaskOptions;
import io.dapr.durabletask.TaskOrchestration;
import io.dapr.durabletask.TaskOrchestrationContext;
import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import taskhub.driver.Programs.All;
import taskhub.driver.Programs.AnyOf;
import taskhub.driver.Programs.CallActivity;
import taskhub.driver.Programs.CallChild;
import taskhub.driver.Programs.ContinueAsNew;
import taskhub.driver.Programs.Fail;
import taskhub.driver.Programs.If;
import taskhub.driver.Programs.IfPatched;
import taskhub.driver.Programs.Program;
import taskhub.driver.Programs.Retry;
import taskhub.driver.Programs.Return;
import taskhub.driver.Programs.SetStatus;
import taskhub.driver.Programs.SetVar;
import taskhub.driver.Programs.Step;
import taskhub.driver.Programs.TaskStep;
import taskhub.driver.Programs.Timer;
import taskhub.driver.Programs.WaitEvent;

/**
 * One program version as a durabletask-java orchestration: walks the steps and calls the SDK's
 * {@link TaskOrchestrationContext} ({@code callActivity}, {@code callSubOrchestrator},
 * {@code createTimer}, {@code waitForExternalEvent}, {@code allOf}, {@code anyOf},
 * {@code isPatched}, {@code setCustomStatus}, {@code continueAsNew}, {@code complete}), awaiting
 * each task with {@code Task.await()}. Failures are left to the SDK: an uncaught task failure or
 * a {@code fail} step's exception fails the orchestration the way the SDK does it.
 *
 * <p>Only the SDK's control-flow throwables (OrchestratorBlockedException,
 * ContinueAsNewInterruption) and failures pass through this code; the one exception caught is
 * {@link TaskCanceledException} of a {@code wait_event} step with a {@code default}, the SDK's
 * documented signal for a wait that timed out.
 */
final class Interpreter implements TaskOrchestration {
  private final Program program;

  Interpreter(Program program) {
    this.program = program;
  }

  /** A {@code return} step ran: the value to complete with. */
  private record Returned(Object value) {}

  @Override
  public void run(TaskOrchestrationContext ctx) {
    Map<String, Object> env = new HashMap<>();
    env.put("input", ctx.getInput(Object.class));
    env.put("instance_id", ctx.getInstanceId());
    Returned out = runSteps(ctx, program.steps(), env);
    ctx.complete(out == null ? null : out.value());
  }

  static Duration duration(double seconds) {
    return Duration.ofNanos(new BigDecimal(Double.toString(seconds)).movePointRight(9).longValue());
  }

  /**
   * The call's options: its retry policy and the app that runs it ({@code router.targetAppID}). The SDK
   * sends the target only once it knows its own app, from the router daprd stamps on ExecutionStarted
   * (ContextImplTask.processEvent); without one it drops appID silently.
   */
  private static TaskOptions options(Retry retry, String app) {
    if (retry == null && app == null) {
      return null;
    }
    TaskOptions.Builder options = TaskOptions.builder();
    if (retry != null) {
      RetryPolicy policy = new RetryPolicy(retry.maxAttempts(), duration(retry.firstDelay()));
      policy.setBackoffCoefficient(retry.backoff());
      if (retry.maxDelay() != null) {
        policy.setMaxRetryInterval(duration(retry.maxDelay()));
      }
      if (retry.timeout() != null) {
        // The SDK's rule: no retry once the workflow's clock at a failure reaches the first attempt's
        // time plus the timeout, not the program language's sum of delays.
        policy.setRetryTimeout(duration(retry.timeout()));
      }
      options.retryPolicy(policy);
    }
    if (app != null) {
      options.appID(app);
    }
    return options.build();
  }

  private static Task<?> makeTask(TaskOrchestrationContext ctx, TaskStep step, Map<String, Object> env) {
    if (step instanceof CallActivity a) {
      return ctx.callActivity(a.name(), Expressions.evaluate(a.input(), env), options(a.retry(), a.app()), Object.class);
    }
    if (step instanceof CallChild c) {
      Object iid = c.instanceId() == null ? null : Expressions.evaluate(c.instanceId(), env);
      return ctx.callSubOrchestrator(c.workflow(), Expressions.evaluate(c.input(), env),
          iid == null ? null : Json.text(iid), options(c.retry(), c.app()), Object.class);
    }
    if (step instanceof Timer t) {
      return ctx.createTimer(duration(t.duration()));
    }
    if (step instanceof WaitEvent w) {
      return ctx.waitForExternalEvent(w.name(), w.timeout() == null ? null : duration(w.timeout()), Object.class);
    }
    throw new IllegalStateException("not a task: " + step);
  }

  private static Returned runSteps(TaskOrchestrationContext ctx, List<Step> steps, Map<String, Object> env) {
    for (Step step : steps) {
      if (step instanceof TaskStep t) {
        Task<?> task = makeTask(ctx, t, env);
        Object value;
        if (t instanceof WaitEvent w && w.hasDefault()) {
          try {
            value = task.await();
          } catch (TaskCanceledException timedOut) {
            value = Expressions.evaluate(w.defaultValue(), env);
          }
        } else {
          value = task.await();
        }
        String as = asOf(t);
        if (as != null) {
          env.put(as, value);
        }
      } else if (step instanceof All all) {
        List<Task<Object>> tasks = new ArrayList<>();
        for (TaskStep t : all.tasks()) {
          tasks.add(cast(makeTask(ctx, t, env)));
        }
        List<Object> values = ctx.allOf(tasks).await();
        if (all.as() != null) {
          env.put(all.as(), new ArrayList<>(values));
        }
      } else if (step instanceof AnyOf any) {
        List<Task<?>> tasks = new ArrayList<>();
        for (TaskStep t : any.tasks()) {
          tasks.add(makeTask(ctx, t, env));
        }
        Task<?> winner = ctx.anyOf(tasks).await();
        Object result = winner.await(); // a failed winner fails the step with its error
        if (any.as() != null) {
          int index = 0;
          while (tasks.get(index) != winner) {
            index++;
          }
          Map<String, Object> v = new LinkedHashMap<>();
          v.put("index", (long) index);
          v.put("result", result);
          env.put(any.as(), v);
        }
      } else if (step instanceof IfPatched p) {
        Returned out = runSteps(ctx, ctx.isPatched(p.patch()) ? p.then() : p.otherwise(), env);
        if (out != null) {
          return out;
        }
      } else if (step instanceof If c) {
        Returned out = runSteps(ctx, Json.truthy(Expressions.evaluate(c.cond(), env)) ? c.then() : c.otherwise(), env);
        if (out != null) {
          return out;
        }
      } else if (step instanceof SetVar s) {
        env.put(s.var(), Expressions.evaluate(s.value(), env));
      } else if (step instanceof SetStatus s) {
        Object value = Expressions.evaluate(s.value(), env);
        if (value == null) {
          ctx.clearCustomStatus();
        } else {
          ctx.setCustomStatus(value); // serialised by the SDK with the data converter
        }
      } else if (step instanceof ContinueAsNew c) {
        ctx.continueAsNew(Expressions.evaluate(c.input(), env), c.carryEvents()); // throws the SDK's interruption
        return new Returned(null);
      } else if (step instanceof Return r) {
        return new Returned(Expressions.evaluate(r.value(), env));
      } else if (step instanceof Fail f) {
        throw ErrorClasses.newError(f.type(), Json.text(Expressions.evaluate(f.message(), env)));
      } else {
        throw new IllegalStateException("step kind " + step.getClass().getSimpleName()); // refused at start-up
      }
    }
    return null;
  }

  private static String asOf(TaskStep t) {
    if (t instanceof CallActivity a) {
      return a.as();
    }
    if (t instanceof CallChild c) {
      return c.as();
    }
    if (t instanceof Timer tm) {
      return tm.as();
    }
    return ((WaitEvent) t).as();
  }

  @SuppressWarnings("unchecked")
  private static Task<Object> cast(Task<?> t) {
    return (Task<Object>) t;
  }
}

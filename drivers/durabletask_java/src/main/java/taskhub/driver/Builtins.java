package taskhub.driver;

import io.dapr.durabletask.TaskActivity;
import io.dapr.durabletask.TaskActivityContext;
import io.dapr.durabletask.TaskActivityFactory;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The built-in activities (echo, fail, sleep, record), a port of {@code fake_worker/activities.py}:
 * same attempt counting per logical call (instance id + task execution id, or task id when the
 * execution id is empty), same errorTypes and messages, same ledger line (Python JSON encoding).
 */
final class Builtins {
  static final String LEDGER_ENV = "CONFORMANCE_LEDGER";

  private final String ledger;
  private final WorkItemTap tap;
  private final Map<List<Object>, Integer> attempts = new HashMap<>();
  private final Object lock = new Object();

  Builtins(String ledger, WorkItemTap tap) {
    this.ledger = ledger;
    this.tap = tap;
  }

  List<TaskActivityFactory> factories() {
    return Programs.BUILTIN_ACTIVITIES.stream().map(this::factory).toList();
  }

  private TaskActivityFactory factory(String name) {
    TaskActivity activity = ctx -> run(name, ctx);
    return new TaskActivityFactory() {
      @Override
      public String getName() {
        return name;
      }

      @Override
      public TaskActivity create() {
        return activity;
      }
    };
  }

  private Object run(String name, TaskActivityContext ctx) {
    Object input = ctx.getInput(Object.class);
    String teid = ctx.getTaskExecutionId();
    int taskId = ctx.getTaskId();
    String iid = tap.instanceFor(teid, taskId, ctx.getName());
    return run(name, input, iid, taskId, teid == null ? "" : teid);
  }

  Object run(String name, Object input, String instanceId, int taskId, String taskExecutionId) {
    List<Object> key = List.of(instanceId, taskExecutionId.isEmpty() ? "task-" + taskId : taskExecutionId, 0);
    int attempt;
    synchronized (lock) {
      attempt = attempts.getOrDefault(key, 0) + 1;
      attempts.put(key, attempt);
    }
    Object[] outcome = builtin(name, input, attempt);
    double seconds = (Double) outcome[1];
    if (seconds > 0) {
      try {
        Thread.sleep((long) (seconds * 1000), (int) ((seconds * 1e9) % 1_000_000));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    switch (name) {
      case "record": {
        String path = ledger != null && !ledger.isEmpty() ? ledger : System.getenv(LEDGER_ENV);
        if (path == null || path.isEmpty()) {
          throw ErrorClasses.newError("LedgerMissing", "the record activity needs env " + LEDGER_ENV + " to name a file");
        }
        Instant now = Instant.now();
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("instance_id", instanceId);
        line.put("task_id", (long) taskId);
        line.put("task_execution_id", taskExecutionId);
        line.put("attempt", (long) attempt);
        line.put("worker_pid", ProcessHandle.current().pid());
        line.put("time", now.getEpochSecond() + now.getNano() / 1e9);
        line.put("input", input);
        byte[] bytes = (Json.dumps(line) + "\n").getBytes(StandardCharsets.UTF_8);
        synchronized (lock) {
          try {
            Files.write(Path.of(path), bytes, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
          } catch (IOException e) {
            throw ErrorClasses.newError("OSError", "cannot append to the ledger " + path + ": " + e);
          }
        }
        return input;
      }
      default:
        return outcome[0];
    }
  }

  private static boolean number(Object v) {
    return v instanceof Number;
  }

  /**
   * {result, seconds to sleep first} of the attempt-th execution of one call (docs/programs.md
   * "Built-in activities"; Check golden compares it with the golden file's activity cases).
   */
  static Object[] builtin(String name, Object input, int attempt) {
    switch (name) {
      case "echo", "record":
        return new Object[] {input, 0.0};
      case "propagated":
        return new Object[] {null, 0.0}; // no history propagation in this driver
      case "sleep":
        if (input == null || number(input)) {
          return new Object[] {input, Math.max(0.0, input == null ? 0.0 : ((Number) input).doubleValue())};
        }
        throw ErrorClasses.newError("ActivityInputError", "sleep takes a number of seconds or null, got " + Json.text(input));
      case "fail": {
        Map<?, ?> spec = input instanceof Map ? (Map<?, ?>) input : null;
        Object times = spec == null ? input : spec.get("times");
        if (times == null) {
          times = 0L;
        }
        if (!number(times)) {
          throw ErrorClasses.newError("ActivityInputError", "fail takes a number or {times, message}, got "
              + Json.text(input));
        }
        if (attempt <= ((Number) times).doubleValue()) {
          String message = spec != null && spec.containsKey("message") ? Json.text(spec.get("message"))
              : "planned failure " + attempt + " of " + Json.text(times);
          throw ErrorClasses.newError("ActivityFailure", message);
        }
        return new Object[] {input, 0.0};
      }
      default:
        throw ErrorClasses.newError("ActivityNotRegisteredError", "Activity function named '" + name
            + "' was not registered.");
    }
  }
}

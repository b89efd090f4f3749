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
    switch (name) {
      case "echo":
        return input;
      case "sleep": {
        double seconds = pyFloat(PyJson.truthy(input) ? input : 0L);
        if (seconds > 0) {
          try {
            Thread.sleep((long) (seconds * 1000), (int) ((seconds * 1e9) % 1_000_000));
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }
        return input;
      }
      case "fail": {
        Map<?, ?> spec;
        if (input instanceof Map) {
          spec = (Map<?, ?>) input;
        } else {
          Map<String, Object> m = new LinkedHashMap<>();
          m.put("times", pyInt(PyJson.truthy(input) ? input : 0L));
          spec = m;
        }
        Object times = spec.containsKey("times") ? spec.get("times") : 0L;
        if (BigInteger.valueOf(attempt).compareTo(pyInt(times)) <= 0) {
          String message = spec.containsKey("message") ? PyJson.str(spec.get("message"))
              : "planned failure " + attempt + " of " + PyJson.str(spec.get("times"));
          throw ErrorClasses.newError("ActivityFailure", message);
        }
        return input;
      }
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
        byte[] bytes = (PyJson.dumps(line) + "\n").getBytes(StandardCharsets.UTF_8);
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
        throw ErrorClasses.newError("ActivityNotRegisteredError",
            "Activity function named '" + name + "' was not registered.");
    }
  }

  /** Python's float(x) for a JSON value. */
  private static double pyFloat(Object v) {
    if (v instanceof Boolean) {
      return ((Boolean) v) ? 1.0 : 0.0;
    }
    if (v instanceof Number) {
      return ((Number) v).doubleValue();
    }
    if (v instanceof String) {
      String s = ((String) v).strip().replace("_", "");
      try {
        return switch (s.toLowerCase()) {
          case "inf", "+inf", "infinity", "+infinity" -> Double.POSITIVE_INFINITY;
          case "-inf", "-infinity" -> Double.NEGATIVE_INFINITY;
          case "nan", "+nan", "-nan" -> Double.NaN;
          default -> Double.parseDouble(s);
        };
      } catch (NumberFormatException e) {
        throw ErrorClasses.newError("ValueError", "could not convert string to float: " + PyJson.reprString((String) v));
      }
    }
    throw ErrorClasses.newError("TypeError",
        "float() argument must be a string or a real number, not '" + PyJson.typeName(v) + "'");
  }

  /** Python's int(x) for a JSON value. */
  private static BigInteger pyInt(Object v) {
    if (v instanceof Boolean) {
      return ((Boolean) v) ? BigInteger.ONE : BigInteger.ZERO;
    }
    if (v instanceof Long) {
      return BigInteger.valueOf((Long) v);
    }
    if (v instanceof BigInteger) {
      return (BigInteger) v;
    }
    if (v instanceof Double) {
      double d = (Double) v;
      if (Double.isNaN(d)) {
        throw ErrorClasses.newError("ValueError", "cannot convert float NaN to integer");
      }
      if (Double.isInfinite(d)) {
        throw ErrorClasses.newError("OverflowError", "cannot convert float infinity to integer");
      }
      return new BigDecimal(d).toBigInteger();
    }
    if (v instanceof String) {
      String s = ((String) v).strip();
      if (s.matches("[+-]?[0-9]+(_[0-9]+)*")) {
        return new BigInteger(s.replace("_", "").replace("+", ""));
      }
      throw ErrorClasses.newError("ValueError", "invalid literal for int() with base 10: " + PyJson.reprString((String) v));
    }
    throw ErrorClasses.newError("TypeError", "int() argument must be a string, a bytes-like object or a real number, not '"
        + PyJson.typeName(v) + "'");
  }
}

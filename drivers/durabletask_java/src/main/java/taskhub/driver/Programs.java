package taskhub.driver;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The programs in the canonical form (docs/programs.md "The canonical form"), the file the harness
 * writes as {@code {canonical}}: one shape per step, every default filled in, durations in seconds,
 * expressions as canonical nodes ({@link Expressions#evaluate} evaluates them). Nothing here parses
 * a shorthand.
 *
 * <p>Two kinds of findings: <b>problems</b> (the file is not the canonical form: exit 2) and
 * <b>gaps</b> (a step kind this driver does not know, or a value the SDK's API cannot take: exit 3,
 * a declared capability gap, never emulated).
 */
final class Programs {
  private Programs() {}

  static final String FORMAT = "taskhub-programs/canonical";
  static final long VERSION = 1;
  static final List<String> BUILTIN_ACTIVITIES = List.of("echo", "fail", "sleep", "record");
  // The pinned release has no history propagation (javap of durabletask-client 1.17.1: TaskOptions
  // holds only retryPolicy, retryHandler and appID; TaskActivityContext and TaskOrchestrationContext
  // have no propagated history): capability `propagation` is declared absent (target.yaml).
  static final String NO_PROPAGATION = "io.dapr:durabletask-client has no history propagation API "
      + "(TaskOptions has no propagation scope, TaskActivityContext no received history)";

  // ------------------------------------------------------------------ model

  /** {@code timeout}: the retries' total timeout in seconds (null: none), {@code RetryPolicy.setRetryTimeout}. */
  record Retry(int maxAttempts, double firstDelay, double backoff, Double maxDelay, Double timeout) {}

  interface Step {}

  interface TaskStep extends Step {}

  /** {@code app}: the app that runs the call (null: the caller's own), {@code TaskOptions.appID}. */
  record CallActivity(String name, Object input, Retry retry, String app, String as) implements TaskStep {}

  record CallChild(String workflow, Object input, Object instanceId, Retry retry, String app, String as)
      implements TaskStep {}

  record Timer(double duration, String as) implements TaskStep {}

  record WaitEvent(String name, Double timeout, boolean hasDefault, Object defaultValue, String as)
      implements TaskStep {}

  record All(List<TaskStep> tasks, String as) implements Step {}

  record AnyOf(List<TaskStep> tasks, String as) implements Step {}

  record IfPatched(String patch, List<Step> then, List<Step> otherwise) implements Step {}

  record If(Object cond, List<Step> then, List<Step> otherwise) implements Step {}

  record SetVar(String var, Object value) implements Step {}

  record SetStatus(Object value) implements Step {}

  record ContinueAsNew(Object input, boolean carryEvents) implements Step {}

  record Return(Object value) implements Step {}

  record Fail(Object message, String type) implements Step {}

  record Program(String name, String version, List<Step> steps) {}

  /** All versions of one workflow name; {@code defaultVersion} null: unversioned (one program under ""). */
  record Family(String name, Map<String, Program> versions, String defaultVersion) {
    boolean versioned() {
      return defaultVersion != null;
    }
  }

  record Bundle(Map<String, Family> programs) {}

  /** The file did not load: every problem and every gap, each with its path. */
  static final class LoadError extends Exception {
    private static final long serialVersionUID = 1L;
    final List<String> problems;
    final List<String> gaps;

    LoadError(List<String> problems, List<String> gaps) {
      super(problems.size() + " problem(s), " + gaps.size() + " gap(s)");
      this.problems = problems;
      this.gaps = gaps;
    }
  }

  // ------------------------------------------------------------------ reading

  @SuppressWarnings("unchecked")
  static Bundle parse(Object doc) throws LoadError {
    Reader r = new Reader();
    if (!(doc instanceof Map) || !FORMAT.equals(((Map<String, Object>) doc).get("format"))
        || !Long.valueOf(VERSION).equals(((Map<String, Object>) doc).get("version"))
        || !(((Map<String, Object>) doc).get("programs") instanceof Map)) {
      throw new LoadError(List.of("$: not the canonical program form (format " + FORMAT + ", version " + VERSION
          + "): pass the file the harness writes as {canonical} (taskhub_programs.canonical_form), not the bundle"),
          List.of());
    }
    Map<String, Family> out = new LinkedHashMap<>();
    Map<String, Map<String, Object>> programs = (Map<String, Map<String, Object>>) ((Map<String, Object>) doc).get("programs");
    for (Map.Entry<String, Map<String, Object>> e : programs.entrySet()) {
      out.put(e.getKey(), r.family(e.getKey(), e.getValue()));
    }
    if (!r.problems.isEmpty() || !r.gaps.isEmpty()) {
      throw new LoadError(r.problems, r.gaps);
    }
    return new Bundle(Collections.unmodifiableMap(out));
  }

  /** Maps the canonical documents onto the model; a malformed document is a problem, not a traceback. */
  private static final class Reader {
    final List<String> problems = new ArrayList<>();
    final List<String> gaps = new ArrayList<>();

    @SuppressWarnings("unchecked")
    Family family(String name, Map<String, Object> body) {
      String def = (String) body.get("default");
      Map<String, Program> versions = new LinkedHashMap<>();
      for (Map<String, Object> v : (List<Map<String, Object>>) body.get("versions")) {
        String version = (String) v.get("name");
        String where = "$.programs." + name + (version == null ? "" : ".versions." + version) + ".steps";
        versions.put(version == null ? "" : version, new Program(name, version, steps(v.get("steps"), where)));
      }
      return new Family(name, Collections.unmodifiableMap(versions), def);
    }

    @SuppressWarnings("unchecked")
    List<Step> steps(Object raw, String where) {
      List<Step> out = new ArrayList<>();
      List<Map<String, Object>> items = (List<Map<String, Object>>) raw;
      for (int i = 0; i < items.size(); i++) {
        Map<String, Object> s = items.get(i);
        String path = where + "[" + i + "]." + s.get("step");
        try {
          Step step = step(s, path);
          if (step != null) {
            out.add(step);
          }
        } catch (ClassCastException | NullPointerException e) {
          problems.add(path + ": not a step of the canonical form (" + e.getMessage() + ")");
        }
      }
      return Collections.unmodifiableList(out);
    }

    @SuppressWarnings("unchecked")
    Step step(Map<String, Object> s, String path) {
      String as = (String) s.get("as");
      switch ((String) s.get("step")) {
        case "call_activity":
          noPropagation(s, path);
          if ("propagated".equals(s.get("name"))) {
            gaps.add(path + ".name: the built-in activity \"propagated\" needs the received history, which "
                + NO_PROPAGATION);
          }
          return new CallActivity((String) s.get("name"), s.get("input"), retry(s.get("retry"), path + ".retry"),
              (String) s.get("app"), as);
        case "call_child":
          noPropagation(s, path);
          return new CallChild((String) s.get("workflow"), s.get("input"), s.get("instance_id"),
              retry(s.get("retry"), path + ".retry"), (String) s.get("app"), as);
        case "timer":
          return new Timer(((Number) s.get("duration")).doubleValue(), as);
        case "wait_event":
          return new WaitEvent((String) s.get("name"),
              s.get("timeout") == null ? null : ((Number) s.get("timeout")).doubleValue(),
              s.get("default") != null, s.get("default"), as);
        case "all":
        case "any": {
          List<TaskStep> tasks = new ArrayList<>();
          for (Step t : steps(s.get("tasks"), path)) {
            tasks.add((TaskStep) t);
          }
          return s.get("step").equals("all") ? new All(List.copyOf(tasks), as) : new AnyOf(List.copyOf(tasks), as);
        }
        case "if_patched":
          return new IfPatched((String) s.get("patch"), steps(s.get("then"), path + ".then"),
              steps(s.get("else"), path + ".else"));
        case "if":
          return new If(s.get("cond"), steps(s.get("then"), path + ".then"), steps(s.get("else"), path + ".else"));
        case "set":
          return new SetVar((String) s.get("var"), s.get("value"));
        case "set_status":
          return new SetStatus(s.get("value"));
        case "continue_as_new":
          return new ContinueAsNew(s.get("input"), (Boolean) s.get("carry_events"));
        case "return":
          return new Return(s.get("value"));
        case "fail": {
          String type = (String) s.get("type");
          String why = ErrorClasses.check(type);
          if (why != null) {
            gaps.add(path + ".type: " + why + "; the Java SDK reports errorType as the exception's class name");
          }
          return new Fail(s.get("message"), type);
        }
        default:
          gaps.add(path + ": step kind " + Json.dumps((String) s.get("step"))
              + " is not expressible with durabletask-java in this driver");
          return null;
      }
    }

    /** The canonical form has {@code propagation} only where a step asks for own or lineage. */
    void noPropagation(Map<String, Object> s, String path) {
      if (s.get("propagation") != null) {
        gaps.add(path + ".propagation: " + Json.dumps((String) s.get("propagation")) + " cannot be requested: "
            + NO_PROPAGATION);
      }
    }

    @SuppressWarnings("unchecked")
    Retry retry(Object raw, String path) {
      if (raw == null) {
        return null;
      }
      Map<String, Object> b = (Map<String, Object>) raw;
      Object attempts = b.get("max_attempts");
      int n = 1;
      if (attempts instanceof BigInteger || (Long) attempts > Integer.MAX_VALUE) {
        gaps.add(path + ".max_attempts: " + Json.dumps(attempts) + " does not fit RetryPolicy's int maxNumberOfAttempts");
      } else {
        n = ((Long) attempts).intValue();
      }
      double first = ((Number) b.get("first_delay")).doubleValue();
      Double maxDelay = b.get("max_delay") == null ? null : ((Number) b.get("max_delay")).doubleValue();
      if (first <= 0) {
        gaps.add(path + ".first_delay: RetryPolicy requires firstRetryInterval > 0 (IllegalArgumentException "
            + "'The value for firstRetryInterval must be greater than zero.')");
      }
      if (maxDelay != null && maxDelay < first) {
        gaps.add(path + ".max_delay: RetryPolicy requires maxRetryInterval >= firstRetryInterval");
      }
      Double timeout = b.get("timeout") == null ? null : ((Number) b.get("timeout")).doubleValue();
      // setRetryTimeout throws below firstRetryInterval, and a zero timeout (which allows no retry in the
      // program language) would mean no limit to the SDK anyway (RetryPolicy.java, TaskOrchestrationExecutor
      // RetriableTask.shouldRetryBasedOnPolicy).
      if (timeout != null && timeout < first) {
        gaps.add(path + ".timeout: RetryPolicy requires retryTimeout >= firstRetryInterval (IllegalArgumentException "
            + "'The value for retryTimeout cannot be null and must be greater than or equal to the value for "
            + "firstRetryInterval.'), and a zero retryTimeout means no limit");
      }
      return new Retry(n, first, ((Number) b.get("backoff")).doubleValue(), maxDelay, timeout);
    }
  }
}

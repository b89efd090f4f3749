package taskhub.driver;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The program language (docs/programs.md): the bundle model and its loader, a port of
 * {@code fake_worker/programs.py} (which stays the authority; the harness validates every bundle
 * with it before handing it to a driver).
 *
 * <p>Two kinds of findings: <b>problems</b> (the bundle does not follow the language: exit 2) and
 * <b>gaps</b> (a step kind or field this driver does not know, or a value the SDK's API cannot
 * take: exit 3, a declared capability gap, never emulated).
 */
final class Programs {
  private Programs() {}

  static final List<String> TASK_KINDS = List.of("call_activity", "call_child", "timer", "wait_event");
  static final List<String> STEP_KINDS = List.of("call_activity", "call_child", "timer", "wait_event", "all", "any",
      "if_patched", "if", "set", "set_status", "continue_as_new", "return", "fail");
  static final List<String> BUILTIN_ACTIVITIES = List.of("echo", "fail", "sleep", "record");

  private static final Pattern VAR = Pattern.compile("^[A-Za-z_][A-Za-z0-9_]*$");
  private static final Pattern DURATION = Pattern.compile("^\\s*(\\d+(?:\\.\\d+)?)\\s*(ms|s|m|h|d)?\\s*$");

  // ------------------------------------------------------------------ model

  record Retry(int maxAttempts, double firstDelay, double backoff, Double maxDelay) {}

  interface Step {}

  interface TaskStep extends Step {}

  record CallActivity(String name, Object input, Retry retry, String as) implements TaskStep {}

  record CallChild(String workflow, Object input, Object instanceId, Retry retry, String as) implements TaskStep {}

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

  /** The bundle did not load: every problem and every gap, each with its path. */
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

  // ------------------------------------------------------------------ loading

  static Bundle parse(Object doc) throws LoadError {
    Parser p = new Parser();
    Bundle b = p.bundle(doc);
    if (!p.problems.isEmpty() || !p.gaps.isEmpty()) {
      throw new LoadError(p.problems, p.gaps);
    }
    return b;
  }

  /** Seconds from a number or a string like '500ms', '2s', '1m', '1h', '1d' (parse_duration). */
  static double parseDuration(Object value) {
    if (value instanceof Boolean) {
      throw new IllegalArgumentException(PyJson.repr(value) + " is not a duration");
    }
    if (value instanceof Number) {
      double d = ((Number) value).doubleValue();
      if (d < 0) {
        throw new IllegalArgumentException("duration " + PyJson.repr(value) + " is negative");
      }
      return d;
    }
    if (value instanceof String) {
      Matcher m = DURATION.matcher((String) value);
      if (m.matches()) {
        double unit = 1.0;
        String u = m.group(2);
        if (u != null) {
          unit = switch (u) {
            case "ms" -> 0.001;
            case "s" -> 1.0;
            case "m" -> 60.0;
            case "h" -> 3600.0;
            case "d" -> 86400.0;
            default -> 1.0;
          };
        }
        return Double.parseDouble(m.group(1)) * unit;
      }
    }
    throw new IllegalArgumentException(PyJson.repr(value)
        + " is not a duration (use seconds or a string like '500ms', '2s', '1m', '1h', '1d')");
  }

  private static final class Parser {
    final List<String> problems = new ArrayList<>();
    final List<String> gaps = new ArrayList<>();

    void err(String path, String msg) {
      problems.add(path + ": " + msg);
    }

    void gap(String path, String msg) {
      gaps.add(path + ": " + msg);
    }

    @SuppressWarnings("unchecked")
    Bundle bundle(Object doc) {
      if (!(doc instanceof Map) || !((Map<String, Object>) doc).containsKey("programs")) {
        err("$", "a program bundle is a mapping with a 'programs' key");
        return new Bundle(Map.of());
      }
      Map<String, Object> d = (Map<String, Object>) doc;
      Set<String> extra = new TreeSet<>(d.keySet());
      extra.remove("programs");
      extra.remove("$schema");
      if (!extra.isEmpty()) {
        err("$", "unknown keys " + PyJson.repr(new ArrayList<>(extra)) + "; allowed: programs");
      }
      Object progs = d.get("programs");
      if (!(progs instanceof Map) || ((Map<String, Object>) progs).isEmpty()) {
        err("$.programs", "must be a non-empty mapping of workflow name to program");
        return new Bundle(Map.of());
      }
      Map<String, Family> out = new LinkedHashMap<>();
      for (Map.Entry<String, Object> e : ((Map<String, Object>) progs).entrySet()) {
        Family f = family(e.getKey(), e.getValue(), "$.programs." + e.getKey());
        if (f != null) {
          out.put(e.getKey(), f);
        }
      }
      return new Bundle(Collections.unmodifiableMap(out));
    }

    @SuppressWarnings("unchecked")
    Family family(String name, Object raw, String path) {
      if (!(raw instanceof Map)) {
        err(path, "must be a mapping with 'steps' or 'versions'");
        return null;
      }
      Map<String, Object> body = (Map<String, Object>) raw;
      if (body.containsKey("versions")) {
        Set<String> extra = new TreeSet<>(body.keySet());
        extra.remove("versions");
        extra.remove("default");
        if (!extra.isEmpty()) {
          err(path, "unknown keys " + PyJson.repr(new ArrayList<>(extra))
              + "; a versioned program has 'versions' and 'default'");
        }
        Object versions = body.get("versions");
        if (!(versions instanceof Map) || ((Map<String, Object>) versions).isEmpty()) {
          err(path + ".versions", "must be a non-empty mapping of version name to {steps: [...]}");
          return null;
        }
        Map<String, Object> vs = (Map<String, Object>) versions;
        String def;
        if (body.get("default") == null) {
          TreeSet<String> names = new TreeSet<>(Expressions::compareCodePoints);
          names.addAll(vs.keySet());
          def = names.last();
        } else {
          def = PyJson.str(body.get("default"));
          if (!vs.containsKey(def)) {
            TreeSet<String> names = new TreeSet<>(Expressions::compareCodePoints);
            names.addAll(vs.keySet());
            err(path + ".default", "names version " + PyJson.repr(body.get("default")) + ", which is not one of "
                + PyJson.repr(new ArrayList<>(names)));
          }
        }
        Map<String, Program> progs = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : vs.entrySet()) {
          String vpath = path + ".versions." + e.getKey();
          if (!(e.getValue() instanceof Map) || !((Map<String, Object>) e.getValue()).keySet().equals(Set.of("steps"))) {
            err(vpath, "must be a mapping with exactly one key, 'steps'");
            continue;
          }
          progs.put(e.getKey(), new Program(name, e.getKey(),
              steps(((Map<String, Object>) e.getValue()).get("steps"), vpath + ".steps")));
        }
        return new Family(name, Collections.unmodifiableMap(progs), def);
      }
      if (!body.keySet().equals(Set.of("steps"))) {
        Set<String> extra = new TreeSet<>(body.keySet());
        extra.remove("steps");
        err(path, "unknown keys " + PyJson.repr(new ArrayList<>(extra)) + "; a program has 'steps' (or 'versions')");
      }
      return new Family(name, Map.of("", new Program(name, null, steps(body.get("steps"), path + ".steps"))), null);
    }

    @SuppressWarnings("unchecked")
    List<Step> steps(Object raw, String path) {
      if (raw == null) {
        return List.of();
      }
      if (!(raw instanceof List)) {
        err(path, "must be a list of steps");
        return List.of();
      }
      List<Step> out = new ArrayList<>();
      List<Object> items = (List<Object>) raw;
      for (int i = 0; i < items.size(); i++) {
        Step s = step(items.get(i), path + "[" + i + "]");
        if (s != null) {
          out.add(s);
        }
      }
      return Collections.unmodifiableList(out);
    }

    /** (kind, body, as) of a step mapping, or null (reported). */
    @SuppressWarnings("unchecked")
    Object[] kind(Object item, String path, List<String> allowed) {
      if (!(item instanceof Map)) {
        err(path, "a step is a mapping with one of " + PyJson.repr(new ArrayList<Object>(allowed)));
        return null;
      }
      Map<String, Object> m = (Map<String, Object>) item;
      List<String> keys = new ArrayList<>();
      for (String k : m.keySet()) {
        if (!k.equals("as")) {
          keys.add(k);
        }
      }
      if (keys.size() != 1 || !allowed.contains(keys.get(0))) {
        if (keys.size() == 1 && !STEP_KINDS.contains(keys.get(0)) && !keys.get(0).startsWith("$")) {
          gap(path, "step kind " + PyJson.reprString(keys.get(0)) + " is not expressible with durabletask-java "
              + "in this driver");
          return null;
        }
        TreeSet<String> sorted = new TreeSet<>(Expressions::compareCodePoints);
        sorted.addAll(m.keySet());
        err(path, "a step has exactly one of " + PyJson.repr(new ArrayList<Object>(allowed))
            + " (plus optional 'as'); got " + PyJson.repr(new ArrayList<>(sorted)));
        return null;
      }
      Object as = m.get("as");
      if (as != null && (!(as instanceof String) || !VAR.matcher((String) as).matches())) {
        err(path + ".as", PyJson.repr(as) + " is not a variable name (letters, digits, '_')");
        as = null;
      }
      return new Object[] {keys.get(0), m.get(keys.get(0)), as};
    }

    @SuppressWarnings("unchecked")
    Step step(Object item, String path) {
      Object[] parsed = kind(item, path, STEP_KINDS);
      if (parsed == null) {
        return null;
      }
      String kind = (String) parsed[0];
      Object body = parsed[1];
      String as = (String) parsed[2];
      String p = path + "." + kind;
      if (TASK_KINDS.contains(kind)) {
        return task(kind, body, p, as);
      }
      if (as != null && !kind.equals("all") && !kind.equals("any")) {
        err(path + ".as", "'" + kind + "' produces no value to store");
      }
      switch (kind) {
        case "all":
        case "any": {
          if (!(body instanceof List) || ((List<Object>) body).isEmpty()) {
            err(p, "must be a non-empty list of tasks (call_activity, call_child, timer, wait_event)");
            return null;
          }
          List<TaskStep> tasks = new ArrayList<>();
          List<Object> items = (List<Object>) body;
          for (int i = 0; i < items.size(); i++) {
            Object[] tp = kind(items.get(i), p + "[" + i + "]", TASK_KINDS);
            if (tp == null) {
              continue;
            }
            if (tp[2] != null) {
              err(p + "[" + i + "].as", "tasks inside all/any have no 'as'; name the all/any step instead");
            }
            TaskStep t = task((String) tp[0], tp[1], p + "[" + i + "]." + tp[0], null);
            if (t != null) {
              tasks.add(t);
            }
          }
          return kind.equals("all") ? new All(List.copyOf(tasks), as) : new AnyOf(List.copyOf(tasks), as);
        }
        case "if_patched": {
          Map<String, Object> b = mapping(body, p, List.of("patch"), List.of("then", "else"));
          if (b == null) {
            return null;
          }
          return new IfPatched(PyJson.str(b.get("patch")), steps(b.get("then"), p + ".then"),
              steps(b.get("else"), p + ".else"));
        }
        case "if": {
          Map<String, Object> b = mapping(body, p, List.of("cond"), List.of("then", "else"));
          if (b == null) {
            return null;
          }
          expr(b.get("cond"), p + ".cond");
          return new If(b.get("cond"), steps(b.get("then"), p + ".then"), steps(b.get("else"), p + ".else"));
        }
        case "set": {
          Map<String, Object> b = mapping(body, p, List.of("var", "value"), List.of());
          if (b == null) {
            return null;
          }
          Object var = b.get("var");
          if (!(var instanceof String) || !VAR.matcher((String) var).matches()) {
            err(p + ".var", PyJson.repr(var) + " is not a variable name");
          }
          expr(b.get("value"), p + ".value");
          return new SetVar(PyJson.str(var), b.get("value"));
        }
        case "set_status":
          expr(body, p);
          return new SetStatus(body);
        case "continue_as_new": {
          Map<String, Object> b = mapping(body != null ? body : Map.of(), p, List.of(), List.of("input", "carry_events"));
          if (b == null) {
            return null;
          }
          Object carry = b.getOrDefault("carry_events", false);
          if (!(carry instanceof Boolean)) {
            err(p + ".carry_events", "must be true or false");
          }
          expr(b.get("input"), p + ".input");
          return new ContinueAsNew(b.get("input"), PyJson.truthy(carry));
        }
        case "return":
          expr(body, p);
          return new Return(body);
        case "fail": {
          if (body instanceof String) {
            return new Fail(body, "ProgramFailure");
          }
          Map<String, Object> b = mapping(body, p, List.of("message"), List.of("type"));
          if (b == null) {
            return null;
          }
          expr(b.get("message"), p + ".message");
          String type = b.containsKey("type") ? PyJson.str(b.get("type")) : "ProgramFailure";
          String why = ErrorClasses.check(type);
          if (why != null) {
            gap(p + ".type", why + "; the Java SDK reports errorType as the exception's class name");
          }
          return new Fail(b.get("message"), type);
        }
        default:
          throw new AssertionError(kind);
      }
    }

    TaskStep task(String kind, Object body, String path, String as) {
      switch (kind) {
        case "call_activity": {
          Map<String, Object> b = mapping(body, path, List.of("name"), List.of("input", "retry"));
          if (b == null) {
            return null;
          }
          expr(b.get("input"), path + ".input");
          return new CallActivity(PyJson.str(b.get("name")), b.get("input"), retry(b.get("retry"), path + ".retry"), as);
        }
        case "call_child": {
          Map<String, Object> b = mapping(body, path, List.of("workflow"), List.of("input", "instance_id", "retry"));
          if (b == null) {
            return null;
          }
          expr(b.get("input"), path + ".input");
          expr(b.get("instance_id"), path + ".instance_id");
          return new CallChild(PyJson.str(b.get("workflow")), b.get("input"), b.get("instance_id"),
              retry(b.get("retry"), path + ".retry"), as);
        }
        case "timer": {
          Object raw = body instanceof Map ? body : singleton("duration", body);
          Map<String, Object> b = mapping(raw, path, List.of("duration"), List.of());
          if (b == null) {
            return null;
          }
          return new Timer(duration(b.get("duration"), path + ".duration"), as);
        }
        case "wait_event": {
          Object raw = body instanceof String ? singleton("name", body) : body;
          Map<String, Object> b = mapping(raw, path, List.of("name"), List.of("timeout", "default"));
          if (b == null) {
            return null;
          }
          Object timeout = b.get("timeout");
          expr(b.get("default"), path + ".default");
          return new WaitEvent(PyJson.str(b.get("name")),
              timeout == null ? null : duration(timeout, path + ".timeout"),
              b.containsKey("default"), b.get("default"), as);
        }
        default:
          throw new AssertionError(kind);
      }
    }

    private static Map<String, Object> singleton(String key, Object value) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put(key, value);
      return m;
    }

    Retry retry(Object raw, String path) {
      if (raw == null) {
        return null;
      }
      Map<String, Object> b = mapping(raw, path, List.of("max_attempts", "first_delay"), List.of("backoff", "max_delay"));
      if (b == null) {
        return null;
      }
      Object attempts = b.get("max_attempts");
      int n = 1;
      if (!(attempts instanceof Long || attempts instanceof BigInteger) || ((Number) attempts).doubleValue() < 1) {
        err(path + ".max_attempts", PyJson.repr(attempts) + " must be a whole number >= 1");
      } else if (attempts instanceof BigInteger || (Long) attempts > Integer.MAX_VALUE) {
        gap(path + ".max_attempts", PyJson.repr(attempts) + " does not fit RetryPolicy's int maxNumberOfAttempts");
      } else {
        n = ((Long) attempts).intValue();
      }
      Object backoffRaw = b.getOrDefault("backoff", 1.0);
      double backoff = 1.0;
      if (!(backoffRaw instanceof Number) || ((Number) backoffRaw).doubleValue() < 1) {
        err(path + ".backoff", PyJson.repr(backoffRaw) + " must be a number >= 1");
      } else {
        backoff = ((Number) backoffRaw).doubleValue();
      }
      double first = duration(b.get("first_delay"), path + ".first_delay");
      Double maxDelay = b.get("max_delay") == null ? null : duration(b.get("max_delay"), path + ".max_delay");
      if (first <= 0) {
        gap(path + ".first_delay", "RetryPolicy requires firstRetryInterval > 0 (IllegalArgumentException "
            + "'The value for firstRetryInterval must be greater than zero.')");
      }
      if (maxDelay != null && maxDelay < first) {
        gap(path + ".max_delay", "RetryPolicy requires maxRetryInterval >= firstRetryInterval");
      }
      return new Retry(n, first, backoff, maxDelay);
    }

    double duration(Object raw, String path) {
      try {
        return parseDuration(raw);
      } catch (IllegalArgumentException e) {
        err(path, e.getMessage());
        return 0.0;
      }
    }

    @SuppressWarnings("unchecked")
    Map<String, Object> mapping(Object raw, String path, List<String> required, List<String> optional) {
      List<Object> allowed = new ArrayList<>(required);
      allowed.addAll(optional);
      if (!(raw instanceof Map)) {
        err(path, "must be a mapping with keys " + PyJson.repr(allowed));
        return null;
      }
      Map<String, Object> m = (Map<String, Object>) raw;
      List<Object> missing = new ArrayList<>();
      for (String k : required) {
        if (!m.containsKey(k)) {
          missing.add(k);
        }
      }
      if (!missing.isEmpty()) {
        err(path, "missing required key(s) " + PyJson.repr(missing));
        return null;
      }
      TreeSet<String> extra = new TreeSet<>(Expressions::compareCodePoints);
      extra.addAll(m.keySet());
      extra.removeAll(required);
      extra.removeAll(optional);
      if (!extra.isEmpty()) {
        // The harness validates bundles with the Python loader first, so a key it accepted and this
        // driver does not know is a language extension this driver predates: a gap, never ignored.
        gap(path, "field(s) " + PyJson.repr(new ArrayList<>(extra)) + " are not expressible with durabletask-java "
            + "in this driver; known: " + PyJson.repr(allowed));
      }
      return m;
    }

    @SuppressWarnings("unchecked")
    void expr(Object raw, String path) {
      if (raw instanceof Map) {
        Map<String, Object> m = (Map<String, Object>) raw;
        List<String> ops = new ArrayList<>();
        for (String k : m.keySet()) {
          if (k.startsWith("$")) {
            ops.add(k);
          }
        }
        if (!ops.isEmpty()) {
          if (m.size() != 1 || !Expressions.OPERATORS.contains(ops.get(0))) {
            TreeSet<String> sorted = new TreeSet<>(Expressions::compareCodePoints);
            sorted.addAll(m.keySet());
            err(path, "an operator is a mapping with one key from " + PyJson.repr(new ArrayList<Object>(Expressions.OPERATORS))
                + "; got " + PyJson.repr(new ArrayList<>(sorted)));
            return;
          }
          expr(m.get(ops.get(0)), path + "." + ops.get(0));
          return;
        }
        for (Map.Entry<String, Object> e : m.entrySet()) {
          expr(e.getValue(), path + "." + e.getKey());
        }
      } else if (raw instanceof List) {
        List<Object> l = (List<Object>) raw;
        for (int i = 0; i < l.size(); i++) {
          expr(l.get(i), path + "[" + i + "]");
        }
      }
    }
  }
}

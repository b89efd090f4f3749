package taskhub.driver;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A test hook for differential tests against the Python reference (tests/drivers/test_java_driver.py):
 * reads one JSON document per line on stdin and writes one line per input on stdout.
 *
 * <pre>
 *   java -cp durabletask-java-driver.jar taskhub.driver.Check json     # line: any JSON value -> Json.dumps of it
 *   java -cp durabletask-java-driver.jar taskhub.driver.Check eval     # line: {"expr": NODE, "env": {...}} (a canonical node)
 *                                                                      #   -> {"value": V} or {"error": [type, message]}
 *   java -cp durabletask-java-driver.jar taskhub.driver.Check str      # line: any JSON value -> Python str() of it, as JSON
 *   java -cp durabletask-java-driver.jar taskhub.driver.Check golden   # line: the golden file's path
 *                                                                      #   -> one line per mismatch, then "N expressions, M mismatch(es)"
 * </pre>
 *
 * <p>{@code golden} checks every expression of tests/programs/golden/programs.json: its canonical node,
 * evaluated in the file's env, gives the recorded value, text, truthiness and display text, or an
 * ExpressionError; and the file's canonical programs load.
 *
 * <p>Not used by the driver itself.
 */
public final class Check {
  private Check() {}

  @SuppressWarnings("unchecked")
  public static void main(String[] args) throws IOException {
    String mode = args.length > 0 ? args[0] : "json";
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (mode.equals("golden")) {
        out.println(golden(java.nio.file.Files.readString(java.nio.file.Path.of(line.strip()), StandardCharsets.UTF_8)));
        continue;
      }
      Object doc = Json.loads(line);
      switch (mode) {
        case "json" -> out.println(Json.dumps(doc));
        case "str" -> out.println(Json.dumps(Json.text(doc)));
        case "eval" -> {
          Map<String, Object> req = (Map<String, Object>) doc;
          Map<String, Object> res = new LinkedHashMap<>();
          try {
            res.put("value", Expressions.evaluate(req.get("expr"), (Map<String, Object>) req.get("env")));
          } catch (RuntimeException e) {
            res.put("error", java.util.List.of(e.getClass().getName(), String.valueOf(e.getMessage())));
          }
          out.println(Json.dumps(res));
        }
        default -> {
          System.err.println("usage: Check json|eval|str|golden < lines");
          System.exit(2);
        }
      }
    }
  }

  @SuppressWarnings("unchecked")
  static String golden(String text) throws IOException {
    Map<String, Object> doc = (Map<String, Object>) Json.loads(text);
    Map<String, Object> env = (Map<String, Object>) doc.get("env");
    java.util.List<Map<String, Object>> cases = (java.util.List<Map<String, Object>>) doc.get("expressions");
    StringBuilder problems = new StringBuilder();
    int mismatches = 0;
    for (int i = 0; i < cases.size(); i++) {
      Map<String, Object> c = cases.get(i);
      String where = "expressions[" + i + "] " + Json.dumps(c.get("expr")) + ": ";
      Object got;
      try {
        got = Expressions.evaluate(c.get("canonical"), env);
      } catch (RuntimeException e) {
        if (!c.containsKey("error") || !e.getClass().getSimpleName().equals("ExpressionError")) {
          problems.append(where).append(e).append('\n');
          mismatches++;
        }
        continue;
      }
      Map<String, Object> outcome = new LinkedHashMap<>();
      outcome.put("value", Json.dumps(got));
      outcome.put("text", Expressions.text(got));
      outcome.put("truthy", Json.truthy(got));
      Map<String, Object> want = new LinkedHashMap<>();
      want.put("value", c.containsKey("error") ? "an ExpressionError" : Json.dumps(c.get("value")));
      want.put("text", c.get("text"));
      want.put("truthy", c.get("truthy"));
      if (!outcome.equals(want)) {
        problems.append(where).append(Json.dumps(outcome)).append(" != ").append(Json.dumps(want)).append('\n');
        mismatches++;
      }
    }
    java.util.List<Map<String, Object>> activities = (java.util.List<Map<String, Object>>) doc.get("activities");
    for (Map<String, Object> c : activities) {
      java.util.List<Object> executions = (java.util.List<Object>) c.get("executions");
      for (int i = 0; i < executions.size(); i++) {
        Map<String, Object> got = new LinkedHashMap<>();
        try {
          Object[] outcome = Builtins.builtin((String) c.get("activity"), c.get("input"), i + 1);
          got.put("result", outcome[0]);
          got.put("sleep", outcome[1]);
        } catch (RuntimeException e) {
          got.put("error_type", e.getClass().getSimpleName());
          got.put("error_message", e.getMessage());
        }
        if (!Json.dumps(got).equals(Json.dumps(executions.get(i)))) {
          problems.append("activities ").append(c.get("activity")).append('(').append(Json.dumps(c.get("input")))
              .append(") execution ").append(i + 1).append(": ").append(Json.dumps(got)).append(" != ")
              .append(Json.dumps(executions.get(i))).append('\n');
          mismatches++;
        }
      }
    }
    try {
      Programs.Bundle b = Programs.parse(doc.get("canonical"));
      if (!"v2".equals(b.programs().get("versioned").defaultVersion())) {
        problems.append("the golden programs' versioned default is not v2\n");
        mismatches++;
      }
    } catch (Programs.LoadError e) {
      if (!e.problems.isEmpty()) {
        problems.append("the golden programs do not load: ").append(e.problems).append('\n');
        mismatches++;
      }
    }
    return problems.toString() + cases.size() + " expressions, " + mismatches + " mismatch(es)";
  }
}

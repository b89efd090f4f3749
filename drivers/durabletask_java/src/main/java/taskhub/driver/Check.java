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
 *   java -cp durabletask-java-driver.jar taskhub.driver.Check json     # line: any JSON value -> PyJson.dumps of it
 *   java -cp durabletask-java-driver.jar taskhub.driver.Check eval     # line: {"expr": E, "env": {...}}
 *                                                                      #   -> {"value": V} or {"error": [type, message]}
 *   java -cp durabletask-java-driver.jar taskhub.driver.Check str      # line: any JSON value -> Python str() of it, as JSON
 * </pre>
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
      Object doc = PyJson.loads(line);
      switch (mode) {
        case "json" -> out.println(PyJson.dumps(doc));
        case "str" -> out.println(PyJson.dumps(PyJson.str(doc)));
        case "eval" -> {
          Map<String, Object> req = (Map<String, Object>) doc;
          Map<String, Object> res = new LinkedHashMap<>();
          try {
            res.put("value", Expressions.evaluate(req.get("expr"), (Map<String, Object>) req.get("env")));
          } catch (RuntimeException e) {
            res.put("error", java.util.List.of(e.getClass().getName(), String.valueOf(e.getMessage())));
          }
          out.println(PyJson.dumps(res));
        }
        default -> {
          System.err.println("usage: Check json|eval|str < lines");
          System.exit(2);
        }
      }
    }
  }
}

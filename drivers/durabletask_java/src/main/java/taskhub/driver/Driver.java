package taskhub.driver;

import io.dapr.durabletask.DurableTaskGrpcWorkerBuilder;
import io.dapr.durabletask.TaskActivityFactory;
import io.dapr.durabletask.TaskOrchestration;
import io.dapr.durabletask.orchestration.TaskOrchestrationFactory;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import taskhub.driver.Programs.Bundle;
import taskhub.driver.Programs.Family;
import taskhub.driver.Programs.Program;

/**
 * Driver for the Dapr Java durable task client (io.dapr:durabletask-client): the program language
 * interpreted with the SDK's own API.
 *
 * <pre>
 *   java -jar .tools/java-driver/durabletask-java-driver.jar --sidecar 127.0.0.1:4001 --canonical programs.canonical.json
 * </pre>
 *
 * <p>Every program of the bundle becomes a {@link TaskOrchestration} registered with
 * {@link DurableTaskGrpcWorkerBuilder#addOrchestration} (versioned programs as one factory per
 * version, the default one marked latest); the built-in activities are {@code TaskActivity}s.
 * Payloads use {@link JsonConverter} (Python's json.dumps encoding). The worker gets its gRPC
 * channel from this driver, with {@link WorkItemTap} on it (readiness, activity instance ids).
 *
 * <p>Prints {@code connected to HOST:PORT} once the work-item stream is open; stops cleanly on
 * SIGTERM/SIGINT. Exit codes: 0 stopped, 2 usage or bundle error, 3 capability gap (a step the
 * SDK cannot express, named by its path; never emulated), 4 could not connect.
 */
public final class Driver {
  static final int EXIT_USAGE = 2;
  static final int EXIT_GAP = 3;
  static final int EXIT_CONNECT = 4;
  static final String SDK = "durabletask-java " + sdkVersion();

  private Driver() {}

  private static String sdkVersion() {
    try (var in = Driver.class.getResourceAsStream("driver.properties")) {
      if (in != null) {
        var props = new java.util.Properties();
        props.load(in);
        return props.getProperty("durabletask.version", "(unknown version)");
      }
    } catch (IOException ignored) {
      // fall through
    }
    return "(unknown version)";
  }

  static final class Exit extends Exception {
    private static final long serialVersionUID = 1L;
    final int code;

    Exit(int code, String message) {
      super(message, null, false, false);
      this.code = code;
    }
  }

  /** Held so that java.util.logging keeps the level (it references loggers weakly). */
  static final java.util.logging.Logger FACTORY_LOG =
      java.util.logging.Logger.getLogger("io.dapr.durabletask.orchestration");

  public static void main(String[] argv) {
    System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tT.%1$tL %4$s %3$s: %5$s%6$s%n");
    // The factory registry logs every lookup at INFO (two lines per turn); the worker's own INFO
    // lines (connects, retries, activity requests) stay.
    FACTORY_LOG.setLevel(java.util.logging.Level.WARNING);
    if (argv.length > 0 && argv[0].equals("--serve")) {
      System.exit(Serve.run(java.util.Arrays.copyOfRange(argv, 1, argv.length)));
    }
    int code;
    try {
      code = run(argv);
    } catch (Exit e) {
      System.err.println("durabletask-java-driver: error: " + e.getMessage());
      System.err.flush();
      code = e.code;
    }
    System.exit(code);
  }

  private static final String USAGE = "usage: durabletask-java-driver --sidecar HOST:PORT --canonical FILE.json "
      + "[--ledger FILE] [--ready-timeout SECONDS]";

  static int run(String[] argv) throws Exit {
    String sidecar = null;
    String canonical = null;
    String ledger = null;
    double readyTimeout = 30.0;
    for (int i = 0; i < argv.length; i++) {
      String a = argv[i];
      if (a.equals("-h") || a.equals("--help")) {
        System.out.println(USAGE);
        return 0;
      }
      String value;
      String name = a;
      int eq = a.indexOf('=');
      if (a.startsWith("--") && eq > 0) {
        name = a.substring(0, eq);
        value = a.substring(eq + 1);
      } else if (i + 1 < argv.length) {
        value = argv[++i];
      } else {
        throw new Exit(EXIT_USAGE, a + " needs a value\n" + USAGE);
      }
      switch (name) {
        case "--sidecar" -> sidecar = value;
        case "--canonical" -> canonical = value;
        case "--ledger" -> ledger = value;
        case "--ready-timeout" -> {
          try {
            readyTimeout = Double.parseDouble(value);
          } catch (NumberFormatException e) {
            throw new Exit(EXIT_USAGE, "--ready-timeout " + value + " is not a number");
          }
        }
        default -> throw new Exit(EXIT_USAGE, "unknown argument " + a + "\n" + USAGE);
      }
    }
    if (sidecar == null || canonical == null) {
      throw new Exit(EXIT_USAGE, "--sidecar and --canonical are required\n" + USAGE);
    }
    Address address = Address.parse(sidecar);
    String host = address.host();
    int port = address.port();

    Bundle bundle = load(Path.of(canonical));

    CountDownLatch stop = new CountDownLatch(1);
    for (String sig : new String[] {"TERM", "INT"}) {
      sun.misc.Signal.handle(new sun.misc.Signal(sig), s -> stop.countDown());
    }
    WarmUp.quietly();
    Session session = Session.open(host, port, bundle, ledger, System.getenv("DAPR_API_TOKEN"));
    boolean up = session.awaitConnected(readyTimeout, stop);
    if (!up && stop.getCount() == 0) { // stopped before the stream opened
      session.close();
      System.err.println("durabletask-java-driver: stopped before connecting");
      return 0;
    }
    if (!up) {
      session.close();
      throw new Exit(EXIT_CONNECT, "cannot connect to the sidecar at " + sidecar + ": no work-item stream within "
          + readyTimeout + "s");
    }
    System.out.println("connected to " + sidecar);
    System.out.flush();
    try {
      stop.await();
    } catch (InterruptedException ignored) {
      // stop
    }
    session.close();
    System.err.println("durabletask-java-driver: stopped");
    return 0;
  }

  /** A sidecar's HOST:PORT ("[::1]:4001" for IPv6). */
  record Address(String host, int port) {
    static Address parse(String sidecar) throws Exit {
      int colon = sidecar.lastIndexOf(':');
      String host = colon > 0 ? sidecar.substring(0, colon) : "";
      String portText = colon > 0 ? sidecar.substring(colon + 1) : "";
      if (host.isEmpty() || !portText.matches("[0-9]{1,5}")) {
        throw new Exit(EXIT_USAGE, "--sidecar '" + sidecar + "' is not HOST:PORT");
      }
      if (host.startsWith("[") && host.endsWith("]")) {
        host = host.substring(1, host.length() - 1);
      }
      return new Address(host, Integer.parseInt(portText));
    }
  }

  static Bundle load(Path path) throws Exit {
    if (!path.toString().endsWith(".json")) {
      throw new Exit(EXIT_USAGE, path + " is not a .json file; this driver reads the canonical form the harness "
          + "writes as {canonical}");
    }
    String text;
    try {
      text = Files.readString(path, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new Exit(EXIT_USAGE, path + ": cannot read the canonical programs: " + e);
    }
    Object doc;
    try {
      doc = Json.loads(text);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new Exit(EXIT_USAGE, path + ": not valid JSON: " + e.getOriginalMessage());
    }
    try {
      return Programs.parse(doc);
    } catch (Programs.LoadError e) {
      if (!e.problems.isEmpty()) {
        StringBuilder sb = new StringBuilder(e.problems.size() + " problem(s) in " + path + ":");
        for (String p : e.problems) {
          sb.append("\n  - ").append(p);
        }
        for (String g : e.gaps) {
          sb.append("\n  - ").append(g);
        }
        throw new Exit(EXIT_USAGE, sb.toString());
      }
      StringBuilder sb = new StringBuilder("the programs use steps " + SDK + " cannot express (declared capability gap; "
          + "refusing to start):");
      for (String g : e.gaps) {
        sb.append("\n  - ").append(g);
      }
      throw new Exit(EXIT_GAP, sb.toString());
    }
  }

  static List<String> register(DurableTaskGrpcWorkerBuilder builder, Bundle bundle, Builtins builtins) {
    List<String> registered = new ArrayList<>();
    for (Family family : bundle.programs().values()) {
      if (!family.versioned()) {
        builder.addOrchestration(factory(family.name(), family.versions().get(""), null, false));
        registered.add(family.name());
        continue;
      }
      for (Map.Entry<String, Program> v : family.versions().entrySet()) {
        boolean latest = v.getKey().equals(family.defaultVersion());
        builder.addOrchestration(factory(family.name(), v.getValue(), v.getKey(), latest));
        registered.add(family.name() + "@" + v.getKey() + (latest ? " (latest)" : ""));
      }
    }
    for (TaskActivityFactory f : builtins.factories()) {
      builder.addActivity(f);
    }
    return registered;
  }

  private static TaskOrchestrationFactory factory(String name, Program program, String version, boolean latest) {
    TaskOrchestration orchestration = new Interpreter(program);
    return new TaskOrchestrationFactory() {
      @Override
      public String getName() {
        return name;
      }

      @Override
      public TaskOrchestration create() {
        return orchestration;
      }

      @Override
      public String getVersionName() {
        return version;
      }

      @Override
      public Boolean isLatestVersion() {
        return latest;
      }
    };
  }
}

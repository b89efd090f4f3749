package taskhub.driver;

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.Writer;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

/**
 * The driver kept warm: one JVM that runs one {@link Session} after another, so a scenario does not pay for
 * a JVM start (conformance/targets/warm.py keeps a pool of these).
 *
 * <pre>
 *   durabletask-java-driver --serve
 * </pre>
 *
 * <p>Listens on 127.0.0.1 (a free port), prints {@code serving on 127.0.0.1:PORT} on stdout and takes one
 * connection, its owner. Requests and answers are JSON lines on it, one at a time:
 *
 * <ul>
 *   <li>{@code {"op": "ping"}} -> {@code {"ok": true}};</li>
 *   <li>{@code {"op": "start", "sidecar", "canonical", "ledger", "api_token", "stdout", "stderr",
 *       "ready_timeout"}}: what a fresh driver gets as arguments and environment, and the two files its
 *       stdout and stderr would be: the session prints there what the fresh driver prints. Answers
 *       {@code {"ok": true, "line": "connected to ..."}} once the work-item stream is open, or
 *       {@code {"ok": false, "exit": CODE, "error": ...}} with the exit code the fresh driver would have had;</li>
 *   <li>{@code {"op": "stop"}}: closes the session, then waits for every thread it started to end. Answers
 *       {@code {"ok": true}}, or {@code {"ok": false, "error": ...}} naming threads still running (the owner
 *       then ends this JVM: the next scenario must not share it with them).</li>
 * </ul>
 *
 * <p>The owner's connection closing (its process ended) ends this JVM, so none outlives its owner.
 */
final class Serve {
  private static final double STOP_WAIT_S = 5.0;
  /** gRPC's shared executors and event loops, and the JDK's common pool, outlive every channel by design. */
  private static final List<String> SHARED_THREADS = List.of("grpc-", "ForkJoinPool.commonPool");

  private Serve() {}

  /** Redirectable output: System.out and System.err write to the running session's files, else to the JVM's own. */
  private static final class Switch extends OutputStream {
    private final OutputStream own;
    private volatile OutputStream target;

    Switch(OutputStream own) {
      this.own = own;
      this.target = own;
    }

    void to(OutputStream next) {
      target = next == null ? own : next;
    }

    @Override
    public void write(int b) throws IOException {
      target.write(b);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      target.write(b, off, len);
    }

    @Override
    public void flush() throws IOException {
      target.flush();
    }
  }

  private static Switch out;
  private static Switch err;
  private static int sessions;

  static int run(String[] argv) {
    if (argv.length != 0) {
      System.err.println("durabletask-java-driver: error: --serve takes no other argument");
      return Driver.EXIT_USAGE;
    }
    out = new Switch(new FileOutputStream(java.io.FileDescriptor.out));
    err = new Switch(new FileOutputStream(java.io.FileDescriptor.err));
    System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    // The root handler took System.err when it was made: give it the switching one, so the SDK's log
    // lines land in the scenario's file as they do in a fresh driver's stderr.
    java.util.logging.Logger root = java.util.logging.Logger.getLogger("");
    for (java.util.logging.Handler h : root.getHandlers()) {
      root.removeHandler(h);
    }
    java.util.logging.ConsoleHandler console = new java.util.logging.ConsoleHandler();
    console.setFormatter(new java.util.logging.SimpleFormatter());
    root.addHandler(console);
    WarmUp.quietly();

    try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      System.out.println("serving on 127.0.0.1:" + server.getLocalPort());
      System.out.flush();
      try (Socket owner = server.accept()) {
        server.close(); // one owner
        return serveOwner(owner);
      }
    } catch (IOException e) {
      System.err.println("durabletask-java-driver: serve: " + e);
      return 1;
    }
  }

  private static int serveOwner(Socket owner) throws IOException {
    BufferedReader in = new BufferedReader(new InputStreamReader(owner.getInputStream(), StandardCharsets.UTF_8));
    Writer reply = new java.io.OutputStreamWriter(owner.getOutputStream(), StandardCharsets.UTF_8);
    Running running = null;
    try {
      for (String line; (line = in.readLine()) != null; ) {
        Map<String, Object> answer;
        Map<?, ?> request;
        try {
          request = (Map<?, ?>) Json.loads(line);
        } catch (IOException | ClassCastException e) {
          answer = Map.of("ok", false, "error", "not a JSON object: " + Json.head(line, 200));
          send(reply, answer);
          continue;
        }
        String op = String.valueOf(request.get("op"));
        switch (op) {
          case "ping" -> answer = Map.of("ok", true);
          case "start" -> {
            if (running != null) {
              answer = Map.of("ok", false, "exit", Driver.EXIT_USAGE, "error", "a session is running: stop it first");
            } else {
              Started started = start(request);
              running = started.running();
              answer = started.answer();
            }
          }
          case "stop" -> {
            answer = stop(running);
            running = null;
          }
          default -> answer = Map.of("ok", false, "error", "unknown op " + op);
        }
        send(reply, answer);
      }
    } finally {
      if (running != null) { // the owner went away mid-scenario
        stop(running);
      }
    }
    return 0;
  }

  private static void send(Writer reply, Map<String, Object> answer) throws IOException {
    reply.write(Json.dumps(answer) + "\n");
    reply.flush();
  }

  /** A session and what it started with: its files, and the threads that were there before it. */
  private record Running(Session session, OutputStream stdout, OutputStream stderr, Set<Thread> before) {}

  private record Started(Running running, Map<String, Object> answer) {}

  private static Started start(Map<?, ?> request) {
    OutputStream stdout;
    OutputStream stderr;
    try {
      stdout = new FileOutputStream(text(request, "stdout"), true);
      stderr = new FileOutputStream(text(request, "stderr"), true);
    } catch (IOException | IllegalArgumentException e) {
      return new Started(null, Map.of("ok", false, "exit", Driver.EXIT_USAGE, "error", "cannot open the logs: " + e));
    }
    out.to(stdout);
    err.to(stderr);
    Set<Thread> before = Set.copyOf(Thread.getAllStackTraces().keySet());
    // Says in the scenario's log that its worker ran in a warm JVM, and which one.
    System.err.println("durabletask-java-driver: session " + ++sessions + " of the warm JVM pid "
        + ProcessHandle.current().pid());
    Session session = null;
    try {
      String sidecar = text(request, "sidecar");
      Driver.Address address = Driver.Address.parse(sidecar);
      Programs.Bundle bundle = Driver.load(Path.of(text(request, "canonical")));
      Object ledger = request.get("ledger");
      Object token = request.get("api_token");
      Object timeout = request.get("ready_timeout");
      double readyTimeout = timeout instanceof Number n ? n.doubleValue() : 30.0;
      session = Session.open(address.host(), address.port(), bundle, ledger == null ? null : ledger.toString(),
          token == null ? null : token.toString());
      if (!session.awaitConnected(readyTimeout, new CountDownLatch(1))) {
        throw new Driver.Exit(Driver.EXIT_CONNECT, "cannot connect to the sidecar at " + sidecar
            + ": no work-item stream within " + readyTimeout + "s");
      }
      String line = "connected to " + sidecar;
      System.out.println(line);
      System.out.flush();
      return new Started(new Running(session, stdout, stderr, before), Map.of("ok", true, "line", line));
    } catch (Driver.Exit e) {
      System.err.println("durabletask-java-driver: error: " + e.getMessage());
      Map<String, Object> answer = Map.of("ok", false, "exit", e.code, "error", e.getMessage());
      Running failed = new Running(session, stdout, stderr, before);
      Map<String, Object> stopped = stop(failed);
      if (!Boolean.TRUE.equals(stopped.get("ok"))) {
        answer = new LinkedHashMap<>(answer);
        answer.put("leak", stopped.get("error"));
      }
      return new Started(null, answer);
    } catch (RuntimeException | LinkageError e) {
      System.err.println("durabletask-java-driver: error: " + e);
      stop(new Running(session, stdout, stderr, before));
      return new Started(null, Map.of("ok", false, "error", "the session did not start: " + e));
    }
  }

  private static String text(Map<?, ?> request, String key) {
    Object v = request.get(key);
    if (!(v instanceof String s) || s.isEmpty()) {
      throw new IllegalArgumentException("the request has no " + key);
    }
    return s;
  }

  /** Closes the session, waits for the threads it started, and gives the output back to the JVM's own. */
  private static Map<String, Object> stop(Running running) {
    if (running == null) {
      return Map.of("ok", true);
    }
    if (running.session() != null) {
      running.session().close();
      System.err.println("durabletask-java-driver: stopped");
    }
    List<String> left = awaitOwnThreadsEnded(running.before());
    System.out.flush();
    System.err.flush();
    out.to(null);
    err.to(null);
    closeQuietly(running.stdout());
    closeQuietly(running.stderr());
    if (!left.isEmpty()) {
      return Map.of("ok", false, "error", "threads still running " + STOP_WAIT_S + "s after the stop: " + left);
    }
    return Map.of("ok", true);
  }

  private static List<String> awaitOwnThreadsEnded(Set<Thread> before) {
    long deadline = System.nanoTime() + (long) (STOP_WAIT_S * 1e9);
    while (true) {
      List<String> left = new ArrayList<>();
      for (Thread t : Thread.getAllStackTraces().keySet()) {
        if (!before.contains(t) && t.isAlive() && t != Thread.currentThread()
            && SHARED_THREADS.stream().noneMatch(t.getName()::startsWith)) {
          left.add(t.getName());
        }
      }
      if (left.isEmpty() || System.nanoTime() >= deadline) {
        return left;
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return left;
      }
    }
  }

  private static void closeQuietly(OutputStream s) {
    try {
      s.close();
    } catch (IOException ignored) {
      // the file is the scenario's log; nothing more to write to it
    }
  }
}

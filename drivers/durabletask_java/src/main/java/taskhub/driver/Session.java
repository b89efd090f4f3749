package taskhub.driver;

import io.dapr.durabletask.DurableTaskGrpcWorker;
import io.dapr.durabletask.DurableTaskGrpcWorkerBuilder;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import taskhub.driver.Programs.Bundle;

/**
 * One SDK worker for one scenario: its own gRPC channel (with a {@link WorkItemTap}), its own thread pool,
 * its own built-in activities (attempt counts, ledger) and its own {@link DurableTaskGrpcWorker}. Nothing
 * of it is static, so a JVM that serves one session after another ({@link Serve}) carries nothing from one
 * to the next once {@link #close} has returned.
 */
final class Session implements AutoCloseable {
  /** Names of the threads a session's pool runs work items on. */
  static final String WORK_THREAD = "durabletask-work";

  private final ManagedChannel channel;
  private final ExecutorService pool;
  private final DurableTaskGrpcWorker worker;
  private final WorkItemTap tap;

  private Session(ManagedChannel channel, ExecutorService pool, DurableTaskGrpcWorker worker, WorkItemTap tap) {
    this.channel = channel;
    this.pool = pool;
    this.worker = worker;
    this.tap = tap;
  }

  /** Registers the bundle's programs and the built-ins, then starts the worker (it connects on its own thread). */
  static Session open(String host, int port, Bundle bundle, String ledger, String apiToken) {
    WorkItemTap tap = new WorkItemTap(apiToken);
    ManagedChannel channel = ManagedChannelBuilder.forAddress(host, port)
        .usePlaintext()
        .proxyDetector(address -> null) // http(s)_proxy settings must not capture a local sidecar
        .intercept(tap)
        .build();
    ExecutorService pool = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, WORK_THREAD);
      t.setDaemon(true);
      return t;
    });
    DurableTaskGrpcWorkerBuilder builder = new DurableTaskGrpcWorkerBuilder()
        .grpcChannel(channel)
        .dataConverter(new JsonConverter())
        .withExecutorService(pool);
    List<String> registered = Driver.register(builder, bundle, new Builtins(ledger, tap));
    System.err.println("durabletask-java-driver: " + Driver.SDK + "; registered " + String.join(", ", registered));
    DurableTaskGrpcWorker worker = builder.build();
    worker.start();
    return new Session(channel, pool, worker, tap);
  }

  /** True once the work-item stream is open; false after `seconds`, or once `stop` is counted down. */
  boolean awaitConnected(double seconds, CountDownLatch stop) {
    long deadline = System.nanoTime() + (long) (seconds * 1e9);
    try {
      while (stop.getCount() > 0 && System.nanoTime() < deadline) {
        if (tap.awaitConnected(channel, 0.1)) {
          return true;
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return false;
  }

  /** Stops the worker's thread, interrupts the work items in flight and closes the channel. */
  @Override
  public void close() {
    worker.close();
    pool.shutdownNow();
    channel.shutdownNow();
    try {
      channel.awaitTermination(2, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}

// The order application of dx_orders.py on the Java SDK (io.dapr:durabletask-client 1.17.1), for
// `conformance replay`. Public API only (DurableTaskGrpcWorkerBuilder, DurableTaskGrpcClientBuilder,
// TaskOrchestrationContext.isPatched). Compiled and run against the SDK jars the Java driver's
// install put in .tools/java-driver/lib (scripts/install-java-driver.sh).
//
//   java -cp 'lib/*:classes' JavaOrders serve  --address HOST:PORT --version v1|v2|v2-patched|renamed
//   java -cp 'lib/*:classes' JavaOrders record --address HOST:PORT --version v1
//
// Versions of `order`: v1 reserve, wait for "approve", charge; v2 an `audit` activity after
// reserve; v2-patched the same behind isPatched("audit"); renamed: v1 registered as "order_v2".

import io.dapr.durabletask.DurableTaskClient;
import io.dapr.durabletask.DurableTaskGrpcClientBuilder;
import io.dapr.durabletask.DurableTaskGrpcWorker;
import io.dapr.durabletask.DurableTaskGrpcWorkerBuilder;
import io.dapr.durabletask.NewOrchestrationInstanceOptions;
import io.dapr.durabletask.OrchestrationMetadata;
import io.dapr.durabletask.OrchestrationRuntimeStatus;
import io.dapr.durabletask.TaskActivity;
import io.dapr.durabletask.TaskActivityFactory;
import io.dapr.durabletask.TaskOrchestration;
import io.dapr.durabletask.TaskOrchestrationContext;
import io.dapr.durabletask.orchestration.TaskOrchestrationFactory;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.function.Predicate;

public final class JavaOrders {
  private JavaOrders() {}

  static TaskOrchestration order(Predicate<TaskOrchestrationContext> withAudit) {
    return ctx -> {
      String item = ctx.getInput(String.class);
      String r = ctx.callActivity("reserve", item, String.class).await();
      if (withAudit.test(ctx)) {
        ctx.callActivity("audit", r, String.class).await();
      }
      ctx.setCustomStatus("waiting");
      ctx.waitForExternalEvent("approve", Boolean.class).await();
      String c = ctx.callActivity("charge", r, String.class).await();
      ctx.complete(Map.of("reserved", r, "charged", c));
    };
  }

  static TaskOrchestrationFactory named(String name, TaskOrchestration o) {
    return new TaskOrchestrationFactory() {
      @Override
      public String getName() {
        return name;
      }

      @Override
      public TaskOrchestration create() {
        return o;
      }

      @Override
      public String getVersionName() {
        return null;
      }

      @Override
      public Boolean isLatestVersion() {
        return false;
      }
    };
  }

  static TaskActivityFactory activity(String name, String prefix) {
    return new TaskActivityFactory() {
      @Override
      public String getName() {
        return name;
      }

      @Override
      public TaskActivity create() {
        return ctx -> prefix + ctx.getInput(String.class);
      }
    };
  }

  public static void main(String[] argv) throws Exception {
    if (argv.length < 3 || !(argv[0].equals("serve") || argv[0].equals("record"))) {
      System.err.println("usage: JavaOrders serve|record --address HOST:PORT [--version V]");
      System.exit(2);
    }
    String address = null;
    String version = "v1";
    for (int i = 1; i + 1 < argv.length; i += 2) {
      if (argv[i].equals("--address")) address = argv[i + 1];
      if (argv[i].equals("--version")) version = argv[i + 1];
    }
    TaskOrchestrationFactory order = switch (version) {
      case "v1" -> named("order", order(ctx -> false));
      case "v2" -> named("order", order(ctx -> true));
      case "v2-patched" -> named("order", order(ctx -> ctx.isPatched("audit")));
      case "renamed" -> named("order_v2", order(ctx -> false));
      default -> null;
    };
    if (address == null || order == null) {
      System.err.println("JavaOrders: --address is required; --version is v1, v2, v2-patched or renamed");
      System.exit(2);
    }
    int colon = address.lastIndexOf(':');
    ManagedChannel channel = ManagedChannelBuilder.forAddress(address.substring(0, colon),
        Integer.parseInt(address.substring(colon + 1))).usePlaintext().proxyDetector(a -> null).build();
    DurableTaskGrpcWorker worker = new DurableTaskGrpcWorkerBuilder().grpcChannel(channel)
        .addOrchestration(order)
        .addActivity(activity("reserve", "reserved:"))
        .addActivity(activity("audit", "audited:"))
        .addActivity(activity("charge", "charged:"))
        .build();
    worker.start();
    if (argv[0].equals("serve")) {
      CountDownLatch stop = new CountDownLatch(1);
      for (String sig : new String[] {"TERM", "INT"}) {
        sun.misc.Signal.handle(new sun.misc.Signal(sig), s -> stop.countDown());
      }
      stop.await();
      worker.close();
      System.exit(0);
    }
    DurableTaskClient client = new DurableTaskGrpcClientBuilder().grpcChannel(channel).build();
    String done = "order-done-0";
    String waiting = "order-waiting-0";
    for (String iid : new String[] {done, waiting}) {
      client.scheduleNewOrchestrationInstance("order", new NewOrchestrationInstanceOptions().setInput("item-0")
          .setInstanceId(iid));
    }
    for (String iid : new String[] {done, waiting}) {
      long deadline = System.nanoTime() + 60_000_000_000L;
      while (true) {
        OrchestrationMetadata md = client.getInstanceMetadata(iid, true);
        String status = md != null && md.isCustomStatusFetched() ? md.readCustomStatusAs(String.class) : null;
        if ("waiting".equals(status)) break;
        if (System.nanoTime() > deadline) throw new IllegalStateException(iid + " never reached its wait");
        Thread.sleep(50);
      }
    }
    client.raiseEvent(done, "approve", true);
    OrchestrationMetadata md = client.waitForInstanceCompletion(done, Duration.ofSeconds(60), true);
    if (md == null || md.getRuntimeStatus() != OrchestrationRuntimeStatus.COMPLETED) {
      throw new IllegalStateException(done + " did not complete");
    }
    System.out.println("{\"completed\": [\"" + done + "\"], \"running\": [\"" + waiting + "\"]}");
    System.out.flush();
    worker.close();
    System.exit(0);
  }
}

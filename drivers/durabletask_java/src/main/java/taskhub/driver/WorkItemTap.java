package taskhub.driver;

import io.dapr.durabletask.implementation.protobuf.OrchestratorService;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ConnectivityState;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A gRPC client interceptor on the channel this driver hands to the SDK
 * ({@code DurableTaskGrpcWorkerBuilder.grpcChannel}, public API). It only watches, never changes:
 *
 * <ul>
 *   <li>readiness: the SDK's {@code start()} returns before the work-item stream exists and has no
 *       callback; the driver prints {@code connected to ...} once the GetWorkItems stream is open
 *       on the transport (see {@link #awaitConnected}).</li>
 *   <li>the instance id of each activity work item: the SDK's {@code TaskActivityContext} exposes
 *       the task id and task execution id but not the workflow instance id, which the built-in
 *       activities need (the {@code fail} attempt key and the {@code record} ledger line).</li>
 * </ul>
 *
 * <p>With {@code DAPR_API_TOKEN} set, every call carries the {@code dapr-api-token} header, which
 * is what the Dapr Java SDK's workflow runtime (io.dapr:dapr-sdk-workflows) adds around this
 * client; durabletask-client itself has no token option.
 */
final class WorkItemTap implements ClientInterceptor {
  private static final Metadata.Key<String> TOKEN = Metadata.Key.of("dapr-api-token", Metadata.ASCII_STRING_MARSHALLER);
  private static final int MAX_REMEMBERED = 100_000;

  private final String apiToken;
  private final CountDownLatch connected = new CountDownLatch(1);
  private final AtomicBoolean streamStarted = new AtomicBoolean();
  /** task execution id (or "task-<id>|<name>" when empty) -> instance id; bounded, oldest dropped. */
  private final Map<String, String> instances = new LinkedHashMap<>(16, 0.75f, false) {
    private static final long serialVersionUID = 1L;

    @Override
    protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
      return size() > MAX_REMEMBERED;
    }
  };

  WorkItemTap(String apiToken) {
    this.apiToken = apiToken == null || apiToken.isEmpty() ? null : apiToken;
  }

  /**
   * Waits until the work-item stream is open: the server answered on it, or the SDK has started the
   * GetWorkItems call and the channel's transport is READY. (gRPC delivers no onReady to calls whose
   * client sends one message, and a server may send no headers before its first work item.)
   */
  boolean awaitConnected(ManagedChannel channel, double seconds) throws InterruptedException {
    long deadline = System.nanoTime() + (long) (seconds * 1e9);
    while (System.nanoTime() < deadline) {
      if (connected.await(20, TimeUnit.MILLISECONDS)) {
        return true;
      }
      if (streamStarted.get() && channel.getState(false) == ConnectivityState.READY) {
        return true;
      }
    }
    return false;
  }

  private static String key(String taskExecutionId, int taskId, String name) {
    return taskExecutionId != null && !taskExecutionId.isEmpty() ? taskExecutionId : "task-" + taskId + "|" + name;
  }

  /** The instance id of the activity work item with this execution id (or task id and name), or "". */
  String instanceFor(String taskExecutionId, int taskId, String name) {
    synchronized (instances) {
      String iid = instances.get(key(taskExecutionId, taskId, name));
      return iid == null ? "" : iid;
    }
  }

  private void note(Object message) {
    if (!(message instanceof OrchestratorService.WorkItem)) {
      return;
    }
    OrchestratorService.WorkItem item = (OrchestratorService.WorkItem) message;
    if (item.hasActivityRequest()) {
      OrchestratorService.ActivityRequest req = item.getActivityRequest();
      synchronized (instances) {
        instances.put(key(req.getTaskExecutionId(), req.getTaskId(), req.getName()),
            req.getOrchestrationInstance().getInstanceId());
      }
    }
  }

  @Override
  public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(MethodDescriptor<ReqT, RespT> method,
                                                             CallOptions callOptions, Channel next) {
    boolean stream = method.getFullMethodName().endsWith("/GetWorkItems");
    return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, callOptions)) {
      @Override
      public void start(Listener<RespT> listener, Metadata headers) {
        if (apiToken != null) {
          headers.put(TOKEN, apiToken);
        }
        if (!stream) {
          super.start(listener, headers);
          return;
        }
        streamStarted.set(true);
        super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
          @Override
          public void onHeaders(Metadata h) {
            connected.countDown();
            super.onHeaders(h);
          }

          @Override
          public void onMessage(RespT message) {
            connected.countDown();
            note(message);
            super.onMessage(message);
          }

          @Override
          public void onClose(Status status, Metadata trailers) {
            if (!status.isOk()) {
              System.err.println("durabletask-java-driver: work-item stream closed: " + status.getCode()
                  + (status.getDescription() != null ? " " + status.getDescription() : ""));
            }
            super.onClose(status, trailers);
          }
        }, headers);
      }
    };
  }
}

package taskhub.driver;

import com.google.protobuf.StringValue;
import com.google.protobuf.Timestamp;
import io.dapr.durabletask.OrchestrationRunner;
import io.dapr.durabletask.implementation.protobuf.OrchestratorService;
import java.util.List;
import java.util.Map;
import taskhub.driver.Programs.Program;

/**
 * Runs one throw-away orchestration turn in-process, with the SDK's public
 * {@link OrchestrationRunner#loadAndRun(byte[], io.dapr.durabletask.TaskOrchestration)}, before the
 * worker connects: a cold JVM otherwise spends a few hundred milliseconds loading and compiling the
 * executor, protobuf and interpreter classes inside the first real turn, which timing-sensitive
 * scenarios (a 1 s timer checked after 500 ms) notice. Nothing of it reaches the sidecar.
 */
final class WarmUp {
  private WarmUp() {}

  /** {@link #run} with the factory registry's lookup warnings off (its lookup of "warmup" warns, then finds "*"). */
  static void quietly() {
    Driver.FACTORY_LOG.setLevel(java.util.logging.Level.OFF);
    run();
    Driver.FACTORY_LOG.setLevel(java.util.logging.Level.WARNING);
  }

  static void run() {
    try {
      // The canonical form of: call_activity echo "${input}-x", timer 1s, return "${input}".
      String canonical = "{\"format\": \"taskhub-programs/canonical\", \"version\": 1, \"programs\": {\"warmup\": "
          + "{\"default\": null, \"versions\": [{\"name\": null, \"steps\": ["
          + "{\"step\": \"call_activity\", \"name\": \"echo\", \"input\": {\"op\": \"concat\", \"arg\": {\"list\": "
          + "[{\"var\": \"input\", \"path\": []}, {\"lit\": \"-x\"}]}}, \"retry\": null, \"as\": null}, "
          + "{\"step\": \"timer\", \"duration\": 1.0, \"as\": null}, "
          + "{\"step\": \"return\", \"value\": {\"var\": \"input\", \"path\": []}}]}]}}}";
      Program program = Programs.parse(Json.loads(canonical)).programs().get("warmup").versions().get("");
      long now = System.currentTimeMillis();
      Timestamp ts = Timestamp.newBuilder().setSeconds(now / 1000).setNanos((int) (now % 1000) * 1_000_000).build();
      OrchestratorService.OrchestratorRequest req = OrchestratorService.OrchestratorRequest.newBuilder()
          .setInstanceId("warmup")
          .addNewEvents(OrchestratorService.HistoryEvent.newBuilder().setEventId(-1).setTimestamp(ts)
              .setOrchestratorStarted(OrchestratorService.OrchestratorStartedEvent.newBuilder()))
          .addNewEvents(OrchestratorService.HistoryEvent.newBuilder().setEventId(-1).setTimestamp(ts)
              .setExecutionStarted(OrchestratorService.ExecutionStartedEvent.newBuilder().setName("warmup")
                  .setInput(StringValue.of(Json.dumps("w")))
                  .setOrchestrationInstance(OrchestratorService.OrchestrationInstance.newBuilder()
                      .setInstanceId("warmup"))))
          .build();
      OrchestratorService.OrchestratorResponse.parseFrom(
          OrchestrationRunner.loadAndRun(req.toByteArray(), new Interpreter(program)));
      Json.loads(Json.dumps(Map.of("a", List.of(1L, 2.5, "\u00e9", true))));
    } catch (Exception | LinkageError e) {
      System.err.println("durabletask-java-driver: warm-up failed (ignored): " + e);
    }
  }
}

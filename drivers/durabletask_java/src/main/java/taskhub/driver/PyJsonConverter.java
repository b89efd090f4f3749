package taskhub.driver;

import com.fasterxml.jackson.core.JsonProcessingException;
import io.dapr.durabletask.DataConverter;

/**
 * The SDK's payload codec, set with the public {@code DurableTaskGrpcWorkerBuilder.dataConverter}:
 * payloads are encoded exactly as Python's {@code json.dumps} does (the encoding of the reference
 * worker and of the Dapr Python SDKs), so that inputs, outputs and event data compare equal
 * across drivers. The SDK's default, {@code JacksonDataConverter}, writes compact JSON
 * ({@code {"a":1}}); that difference is a property of the payload codec, not of the protocol.
 *
 * <p>Decoding gives plain JSON values (see {@link PyJson}); every call site in this driver asks
 * for {@code Object.class}.
 */
final class PyJsonConverter implements DataConverter {
  @Override
  public String serialize(Object value) {
    if (value == null) {
      return null;
    }
    try {
      return PyJson.dumps(value);
    } catch (IllegalArgumentException e) {
      throw new DataConverterException("Failed to serialize argument of type '" + value.getClass().getName()
          + "'. Detailed error message: " + e.getMessage(), e);
    }
  }

  @Override
  public <T> T deserialize(String data, Class<T> target) {
    if (data == null || data.isEmpty() || target == Void.class) {
      return null;
    }
    try {
      return target.cast(PyJson.loads(data));
    } catch (JsonProcessingException | ClassCastException e) {
      throw new DataConverterException("Failed to deserialize the JSON text to " + target.getName()
          + ". Detailed error message: " + e.getMessage(), e);
    }
  }
}

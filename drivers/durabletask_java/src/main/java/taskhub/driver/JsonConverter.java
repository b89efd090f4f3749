package taskhub.driver;

import com.fasterxml.jackson.core.JsonProcessingException;
import io.dapr.durabletask.DataConverter;

/**
 * The SDK's payload codec, set with the public {@code DurableTaskGrpcWorkerBuilder.dataConverter}:
 * payloads are the values' JSON text ({@link Json#dumps}), and decode to the values of
 * the program language.
 *
 * <p>Decoding gives plain JSON values (see {@link Json}); every call site in this driver asks
 * for {@code Object.class}.
 */
final class JsonConverter implements DataConverter {
  @Override
  public String serialize(Object value) {
    if (value == null) {
      return null;
    }
    try {
      return Json.dumps(value);
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
      return target.cast(Json.loads(data));
    } catch (JsonProcessingException | ClassCastException e) {
      throw new DataConverterException("Failed to deserialize the JSON text to " + target.getName()
          + ". Detailed error message: " + e.getMessage(), e);
    }
  }
}

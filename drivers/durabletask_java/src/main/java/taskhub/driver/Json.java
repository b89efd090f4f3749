package taskhub.driver;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The values of the program language: what Jackson decodes ({@code null}, {@link Boolean},
 * {@link Long}/{@link BigInteger}/{@link Double}, {@link String}, {@link List}, {@link Map}), and
 * their text: Jackson's JSON with map entries ordered by key and numbers in ECMAScript's form,
 * which is JSON.stringify's (docs/programs.md "Values").
 */
final class Json {
  private Json() {}

  private static final ObjectMapper MAPPER = JsonMapper.builder(
          JsonFactory.builder().enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build())
      .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
      .build();

  /** A value that {@code json.loads} would give (ints as Long/BigInteger, floats as Double). */
  static Object loads(String text) throws JsonProcessingException {
    Object raw = MAPPER.readValue(text, Object.class);
    return normalise(raw);
  }

  @SuppressWarnings("unchecked")
  private static Object normalise(Object v) {
    if (v instanceof Integer || v instanceof Short || v instanceof Byte) {
      return ((Number) v).longValue();
    }
    if (v instanceof BigInteger) {
      BigInteger b = (BigInteger) v;
      return b.bitLength() < 64 ? (Object) b.longValue() : b;
    }
    if (v instanceof Float) {
      return ((Float) v).doubleValue();
    }
    if (v instanceof BigDecimal) {
      return ((BigDecimal) v).doubleValue();
    }
    if (v instanceof List) {
      List<Object> out = new ArrayList<>();
      for (Object x : (List<Object>) v) {
        out.add(normalise(x));
      }
      return out;
    }
    if (v instanceof Map) {
      Map<String, Object> out = new LinkedHashMap<>();
      for (Map.Entry<Object, Object> e : ((Map<Object, Object>) v).entrySet()) {
        out.put(String.valueOf(e.getKey()), normalise(e.getValue()));
      }
      return out;
    }
    return v;
  }

  // ------------------------------------------------------------------ the text of a value

  /** A value as JSON, as JSON.stringify writes it with sorted keys (docs/programs.md "Values"). */
  static String dumps(Object v) {
    try {
      return WRITER.writeValueAsString(numbers(v));
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(e.getMessage(), e);
    }
  }

  /** The text of a value: a string as it is, anything else as JSON. */
  static String text(Object v) {
    return v instanceof String ? (String) v : dumps(v);
  }

  private static final ObjectMapper WRITER = JsonMapper.builder()
      .enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS)
      .disable(com.fasterxml.jackson.core.json.JsonWriteFeature.WRITE_HEX_UPPER_CASE) // \u001f, as JSON.stringify
      .build();

  /** Numbers in ECMAScript's form (Number::toString), the one thing Jackson writes otherwise. */
  @SuppressWarnings("unchecked")
  private static Object numbers(Object v) {
    if (v instanceof Number) {
      return new RawNumber(numberText((Number) v));
    }
    if (v instanceof List) {
      List<Object> out = new ArrayList<>();
      for (Object x : (List<Object>) v) {
        out.add(numbers(x));
      }
      return out;
    }
    if (v instanceof Map) {
      Map<String, Object> out = new java.util.TreeMap<>();
      for (Map.Entry<Object, Object> e : ((Map<Object, Object>) v).entrySet()) {
        out.put(String.valueOf(e.getKey()), numbers(e.getValue()));
      }
      return out;
    }
    return v;
  }

  /** A number written as it is: Jackson's @JsonRawValue. */
  static final class RawNumber {
    private final String text;

    RawNumber(String text) {
      this.text = text;
    }

    @com.fasterxml.jackson.annotation.JsonValue
    @com.fasterxml.jackson.annotation.JsonRawValue
    public String text() {
      return text;
    }
  }

  private static final BigInteger EXACT = BigInteger.TWO.pow(53);

  static String numberText(Number n) {
    if ((n instanceof Long || n instanceof BigInteger || n instanceof Integer)
        && new BigInteger(n.toString()).abs().compareTo(EXACT) <= 0) {
      return n.toString();
    }
    double d = n.doubleValue();
    if (Double.isNaN(d) || Double.isInfinite(d)) {
      return "null";
    }
    if (d == Math.rint(d) && Math.abs(d) < 1e21) {
      return new BigDecimal(d).toBigInteger().toString();
    }
    // The fewest digits that read back (Java 17's Double.toString is not always the shortest).
    BigDecimal exact = new BigDecimal(Math.abs(d));
    BigDecimal shortest = exact;
    for (int p = 1; p <= 17; p++) {
      BigDecimal r = exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
      if (r.doubleValue() == Math.abs(d)) {
        shortest = r;
        break;
      }
    }
    shortest = shortest.stripTrailingZeros();
    String digits = shortest.unscaledValue().toString();
    int k = digits.length();
    int point = k - shortest.scale(); // where the decimal point goes
    String out;
    if (point > 0 && point <= 21) {
      out = k > point ? digits.substring(0, point) + "." + digits.substring(point) : digits + "0".repeat(point - k);
    } else if (point > -6 && point <= 0) {
      out = "0." + "0".repeat(-point) + digits;
    } else {
      int e = point - 1;
      out = digits.charAt(0) + (k > 1 ? "." + digits.substring(1) : "") + "e" + (e > 0 ? "+" : "-") + Math.abs(e);
    }
    return d < 0 ? "-" + out : out;
  }

  static String typeName(Object v) {
    if (v == null) {
      return "NoneType";
    }
    if (v instanceof Boolean) {
      return "bool";
    }
    if (v instanceof Long || v instanceof BigInteger || v instanceof Integer) {
      return "int";
    }
    if (v instanceof Double) {
      return "float";
    }
    if (v instanceof String) {
      return "str";
    }
    if (v instanceof List) {
      return "list";
    }
    if (v instanceof Map) {
      return "dict";
    }
    return v.getClass().getSimpleName();
  }

  /** Python truthiness of a JSON value. */
  static boolean truthy(Object v) {
    if (v == null) {
      return false;
    }
    if (v instanceof Boolean) {
      return (Boolean) v;
    }
    if (v instanceof Long) {
      return (Long) v != 0L;
    }
    if (v instanceof BigInteger) {
      return ((BigInteger) v).signum() != 0;
    }
    if (v instanceof Double) {
      return (Double) v != 0.0; // NaN is truthy, as in Python
    }
    if (v instanceof String) {
      return !((String) v).isEmpty();
    }
    if (v instanceof List) {
      return !((List<?>) v).isEmpty();
    }
    if (v instanceof Map) {
      return !((Map<?, ?>) v).isEmpty();
    }
    return true;
  }

  /** The first {@code n} characters of a str, counting code points as Python does. */
  static String head(String s, int n) {
    if (s.codePointCount(0, s.length()) <= n) {
      return s;
    }
    return s.substring(0, s.offsetByCodePoints(0, n));
  }
}

package taskhub.driver;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
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
 * JSON values with Python's semantics, so that this driver's payloads and program values are the
 * ones the reference worker (CPython 3.11, {@code json.dumps} with default settings) produces.
 *
 * <p>Values are {@code null}, {@link Boolean}, {@link Long}, {@link BigInteger} (ints beyond 64 bits),
 * {@link Double}, {@link String}, {@link List} and {@link Map} (insertion-ordered, string keys).
 * Parsing uses Jackson; encoding is ours: {@code ", "} and {@code ": "} separators, {@code
 * ensure_ascii} escapes, Python's shortest float repr, {@code NaN}/{@code Infinity}.
 */
final class PyJson {
  private PyJson() {}

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

  // ------------------------------------------------------------------ encoding (json.dumps)

  static String dumps(Object v) {
    StringBuilder sb = new StringBuilder();
    write(sb, v);
    return sb.toString();
  }

  @SuppressWarnings("unchecked")
  private static void write(StringBuilder sb, Object v) {
    if (v == null) {
      sb.append("null");
    } else if (v instanceof Boolean) {
      sb.append(((Boolean) v) ? "true" : "false");
    } else if (v instanceof Long || v instanceof Integer || v instanceof BigInteger
        || v instanceof Short || v instanceof Byte) {
      sb.append(v.toString());
    } else if (v instanceof Double || v instanceof Float) {
      double d = ((Number) v).doubleValue();
      if (Double.isNaN(d)) {
        sb.append("NaN");
      } else if (Double.isInfinite(d)) {
        sb.append(d > 0 ? "Infinity" : "-Infinity");
      } else {
        sb.append(floatRepr(d));
      }
    } else if (v instanceof String) {
      writeString(sb, (String) v);
    } else if (v instanceof List) {
      sb.append('[');
      boolean first = true;
      for (Object x : (List<Object>) v) {
        if (!first) {
          sb.append(", ");
        }
        first = false;
        write(sb, x);
      }
      sb.append(']');
    } else if (v instanceof Map) {
      sb.append('{');
      boolean first = true;
      for (Map.Entry<Object, Object> e : ((Map<Object, Object>) v).entrySet()) {
        if (!first) {
          sb.append(", ");
        }
        first = false;
        writeString(sb, keyText(e.getKey()));
        sb.append(": ");
        write(sb, e.getValue());
      }
      sb.append('}');
    } else {
      throw new IllegalArgumentException("Object of type " + v.getClass().getName() + " is not JSON serializable");
    }
  }

  private static String keyText(Object k) {
    if (k instanceof String) {
      return (String) k;
    }
    if (k == null) {
      return "null";
    }
    if (k instanceof Boolean) {
      return ((Boolean) k) ? "true" : "false";
    }
    if (k instanceof Double) {
      double d = (Double) k;
      if (Double.isNaN(d)) {
        return "NaN";
      }
      if (Double.isInfinite(d)) {
        return d > 0 ? "Infinity" : "-Infinity";
      }
      return floatRepr(d);
    }
    return k.toString();
  }

  private static final char[] HEX = "0123456789abcdef".toCharArray();

  /** json.dumps of a str with ensure_ascii=True: every char outside ' '..'~' escaped. */
  static void writeString(StringBuilder sb, String s) {
    sb.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': sb.append("\\\""); break;
        case '\\': sb.append("\\\\"); break;
        case '\n': sb.append("\\n"); break;
        case '\r': sb.append("\\r"); break;
        case '\t': sb.append("\\t"); break;
        case '\b': sb.append("\\b"); break;
        case '\f': sb.append("\\f"); break;
        default:
          if (c >= ' ' && c <= '~') {
            sb.append(c);
          } else {
            // UTF-16 code units are exactly Python's surrogate-pair escapes for astral chars.
            sb.append("\\u").append(HEX[(c >> 12) & 0xf]).append(HEX[(c >> 8) & 0xf])
                .append(HEX[(c >> 4) & 0xf]).append(HEX[c & 0xf]);
          }
      }
    }
    sb.append('"');
  }

  /**
   * Python's {@code repr(float)} for a finite double: the shortest decimal that round-trips
   * (the nearest one of that length), in fixed notation when the decimal exponent is in
   * [-4, 16), else as {@code d.ddde+XX}.
   */
  static String floatRepr(double d) {
    if (d == 0.0) {
      return (1.0 / d < 0) ? "-0.0" : "0.0";
    }
    BigDecimal exact = new BigDecimal(d);
    BigDecimal shortest = null;
    for (int p = 1; p <= 17; p++) {
      BigDecimal r = exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
      if (r.doubleValue() == d) {
        shortest = r;
        break;
      }
    }
    if (shortest == null) {
      shortest = exact.round(new MathContext(17, RoundingMode.HALF_EVEN));
    }
    boolean negative = shortest.signum() < 0;
    BigDecimal abs = shortest.abs().stripTrailingZeros();
    String digits = abs.unscaledValue().toString();
    // value = 0.DIGITS x 10^decpt
    int decpt = digits.length() - abs.scale();
    StringBuilder sb = new StringBuilder();
    if (negative) {
      sb.append('-');
    }
    if (decpt > -4 && decpt <= 16) {
      if (decpt <= 0) {
        sb.append("0.");
        for (int i = 0; i < -decpt; i++) {
          sb.append('0');
        }
        sb.append(digits);
      } else if (decpt >= digits.length()) {
        sb.append(digits);
        for (int i = digits.length(); i < decpt; i++) {
          sb.append('0');
        }
        sb.append(".0");
      } else {
        sb.append(digits, 0, decpt).append('.').append(digits.substring(decpt));
      }
    } else {
      sb.append(digits.charAt(0));
      if (digits.length() > 1) {
        sb.append('.').append(digits.substring(1));
      }
      int exp = decpt - 1;
      sb.append('e').append(exp < 0 ? '-' : '+');
      int a = Math.abs(exp);
      if (a < 10) {
        sb.append('0');
      }
      sb.append(a);
    }
    return sb.toString();
  }

  // ------------------------------------------------------------------ Python's str() / repr()

  /** Python's {@code str(value)} for a JSON value. */
  static String str(Object v) {
    return v instanceof String ? (String) v : repr(v);
  }

  /** Python's {@code repr(value)} for a JSON value. */
  @SuppressWarnings("unchecked")
  static String repr(Object v) {
    if (v == null) {
      return "None";
    }
    if (v instanceof Boolean) {
      return ((Boolean) v) ? "True" : "False";
    }
    if (v instanceof Double) {
      double d = (Double) v;
      if (Double.isNaN(d)) {
        return "nan";
      }
      if (Double.isInfinite(d)) {
        return d > 0 ? "inf" : "-inf";
      }
      return floatRepr(d);
    }
    if (v instanceof Long || v instanceof BigInteger || v instanceof Integer) {
      return v.toString();
    }
    if (v instanceof String) {
      return reprString((String) v);
    }
    if (v instanceof List) {
      StringBuilder sb = new StringBuilder("[");
      boolean first = true;
      for (Object x : (List<Object>) v) {
        if (!first) {
          sb.append(", ");
        }
        first = false;
        sb.append(repr(x));
      }
      return sb.append(']').toString();
    }
    if (v instanceof Map) {
      StringBuilder sb = new StringBuilder("{");
      boolean first = true;
      for (Map.Entry<Object, Object> e : ((Map<Object, Object>) v).entrySet()) {
        if (!first) {
          sb.append(", ");
        }
        first = false;
        sb.append(repr(e.getKey())).append(": ").append(repr(e.getValue()));
      }
      return sb.append('}').toString();
    }
    return String.valueOf(v);
  }

  static String reprString(String s) {
    char quote = (s.indexOf('\'') >= 0 && s.indexOf('"') < 0) ? '"' : '\'';
    StringBuilder sb = new StringBuilder().append(quote);
    for (int i = 0; i < s.length(); ) {
      int cp = s.codePointAt(i);
      i += Character.charCount(cp);
      if (cp == quote || cp == '\\') {
        sb.append('\\').appendCodePoint(cp);
      } else if (cp == '\t') {
        sb.append("\\t");
      } else if (cp == '\n') {
        sb.append("\\n");
      } else if (cp == '\r') {
        sb.append("\\r");
      } else if (cp < ' ' || cp == 0x7f) {
        sb.append(String.format("\\x%02x", cp));
      } else if (cp < 0x7f || isPrintable(cp)) {
        sb.appendCodePoint(cp);
      } else if (cp <= 0xff) {
        sb.append(String.format("\\x%02x", cp));
      } else if (cp <= 0xffff) {
        sb.append(String.format("\\u%04x", cp));
      } else {
        sb.append(String.format("\\U%08x", cp));
      }
    }
    return sb.append(quote).toString();
  }

  /** str.isprintable() for one code point: not Cc, Cf, Cs, Co, Cn, Zl, Zp, or Zs other than space. */
  private static boolean isPrintable(int cp) {
    if (cp == ' ') {
      return true;
    }
    switch (Character.getType(cp)) {
      case Character.CONTROL:
      case Character.FORMAT:
      case Character.SURROGATE:
      case Character.PRIVATE_USE:
      case Character.UNASSIGNED:
      case Character.LINE_SEPARATOR:
      case Character.PARAGRAPH_SEPARATOR:
      case Character.SPACE_SEPARATOR:
        return false;
      default:
        return true;
    }
  }

  /** Python's type name of a JSON value, for error messages. */
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

package taskhub.driver;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * Expressions of the program language as canonical nodes (docs/programs.md "The canonical form"),
 * evaluated with the semantics of docs/programs.md "Values" (the values and their text are
 * {@link Json}'s). A bad expression raises an exception whose class is named {@code ExpressionError}
 * (so the SDK reports that errorType).
 */
final class Expressions {
  private Expressions() {}

  private static final Pattern INDEX = Pattern.compile("-?[0-9]+");

  /** Python's TypeError / IndexError / KeyError inside an operator; becomes an ExpressionError. */
  static final class PyError extends Exception {
    private static final long serialVersionUID = 1L;

    PyError(String message) {
      super(message, null, false, false);
    }
  }

  static RuntimeException expressionError(String message) {
    return ErrorClasses.newError("ExpressionError", message);
  }

  /** The value of a canonical expression node on these variables (an ExpressionError if it has none). */
  @SuppressWarnings("unchecked")
  static Object evaluate(Object node, Map<String, Object> env) {
    Map<String, Object> n = node instanceof Map ? (Map<String, Object>) node : Map.of();
    String tag = n.isEmpty() ? "" : n.keySet().iterator().next();
    Object arg = n.get(tag);
    switch (tag) {
      case "lit", "int", "float":
        return arg;
      case "list": {
        List<Object> out = new ArrayList<>();
        for (Object v : (List<Object>) arg) {
          out.add(evaluate(v, env));
        }
        return out;
      }
      case "text": {
        StringBuilder sb = new StringBuilder();
        for (Object v : (List<Object>) arg) {
          sb.append(text(evaluate(v, env)));
        }
        return sb.toString();
      }
      case "map": {
        Map<String, Object> out = new LinkedHashMap<>();
        for (List<Object> kv : (List<List<Object>>) arg) {
          out.put((String) kv.get(0), evaluate(kv.get(1), env));
        }
        return out;
      }
      case "var":
        return lookup((String) arg, (List<String>) n.get("path"), env);
      case "op":
        return apply("$" + arg, evaluate(n.get("arg"), env));
      default:
        throw expressionError("not an expression node: " + Json.head(Json.dumps(node), 80));
    }
  }

  /** `_text`: strings as they are, anything else as JSON. */
  static String text(Object v) {
    return v instanceof String ? (String) v : Json.dumps(v);
  }

  @SuppressWarnings("unchecked")
  private static Object lookup(String head, List<String> path, Map<String, Object> env) {
    String ref = head + (path.isEmpty() ? "" : "." + String.join(".", path));
    if (!env.containsKey(head)) {
      Set<String> known = new TreeSet<>(Expressions::compareCodePoints);
      known.addAll(env.keySet());
      throw expressionError("unknown variable " + quote(head) + " in '${" + ref + "}'; known: "
          + Json.dumps(new ArrayList<>(known)));
    }
    Object value = env.get(head);
    for (String part : path) {
      if (value instanceof List && INDEX.matcher(part).matches()) {
        List<Object> list = (List<Object>) value;
        BigInteger idx = new BigInteger(part);
        if (idx.compareTo(BigInteger.valueOf(-list.size())) >= 0 && idx.compareTo(BigInteger.valueOf(list.size())) < 0) {
          int k = idx.intValue();
          value = list.get(k < 0 ? list.size() + k : k);
          continue;
        }
      }
      if (value instanceof Map && ((Map<String, Object>) value).containsKey(part)) {
        value = ((Map<String, Object>) value).get(part);
        continue;
      }
      throw expressionError("'${" + ref + "}': " + Json.dumps(part) + " not found in "
          + Json.head(Json.dumps(value), 80));
    }
    return value;
  }

  /** f"'{x}'" (the loader's messages put names in plain single quotes). */
  private static String quote(String s) {
    return "'" + s + "'";
  }

  private static Object apply(String op, Object arg) {
    try {
      switch (op) {
        case "$add": {
          List<Object> items = iterate(arg);
          for (Object a : items) {
            if (a instanceof String) {
              return join(items);
            }
          }
          return sum(items);
        }
        case "$sub":
          return sub(subscript(arg, 0), subscript(arg, 1));
        case "$lt":
          return compare(subscript(arg, 0), subscript(arg, 1), "<");
        case "$le":
          return compare(subscript(arg, 0), subscript(arg, 1), "<=");
        case "$eq":
          return pyEquals(subscript(arg, 0), subscript(arg, 1));
        case "$not":
          return !Json.truthy(arg);
        case "$len":
          return len(arg);
        case "$sum":
          return sum(iterate(arg));
        case "$concat":
          return join(iterate(arg));
        default:
          break;
      }
    } catch (PyError exc) {
      throw expressionError(op + " cannot be applied to " + Json.head(Json.dumps(arg), 80) + ": "
          + exc.getMessage());
    }
    throw expressionError("unknown operator " + op);
  }

  // ------------------------------------------------------------------ Python semantics

  private static String join(List<Object> items) {
    StringBuilder sb = new StringBuilder();
    for (Object a : items) {
      sb.append(text(a));
    }
    return sb.toString();
  }

  @SuppressWarnings("unchecked")
  static List<Object> iterate(Object v) throws PyError {
    if (v instanceof List) {
      return (List<Object>) v;
    }
    if (v instanceof String) {
      List<Object> out = new ArrayList<>();
      ((String) v).codePoints().forEach(cp -> out.add(new String(Character.toChars(cp))));
      return out;
    }
    if (v instanceof Map) {
      return new ArrayList<>(new TreeSet<>(((Map<String, Object>) v).keySet())); // sorted keys
    }
    throw new PyError("'" + Json.typeName(v) + "' object is not iterable");
  }

  @SuppressWarnings("unchecked")
  private static Object subscript(Object v, int i) throws PyError {
    if (v instanceof List) {
      List<Object> list = (List<Object>) v;
      if (i >= list.size()) {
        throw new PyError("list index out of range");
      }
      return list.get(i);
    }
    if (v instanceof String) {
      String s = (String) v;
      if (i >= s.codePointCount(0, s.length())) {
        throw new PyError("string index out of range");
      }
      int at = s.offsetByCodePoints(0, i);
      return new String(Character.toChars(s.codePointAt(at)));
    }
    if (v instanceof Map) {
      throw new PyError(Integer.toString(i)); // str(KeyError(i)): JSON keys are never ints
    }
    throw new PyError("'" + Json.typeName(v) + "' object is not subscriptable");
  }

  private static Object len(Object v) throws PyError {
    if (v instanceof List) {
      return (long) ((List<?>) v).size();
    }
    if (v instanceof String) {
      String s = (String) v;
      return (long) s.codePointCount(0, s.length());
    }
    if (v instanceof Map) {
      return (long) ((Map<?, ?>) v).size();
    }
    throw new PyError("object of type '" + Json.typeName(v) + "' has no len()");
  }

  /** sum(items) with start 0: left to right, Python's + on each step. */
  private static Object sum(List<Object> items) throws PyError {
    Object acc = 0L;
    for (Object x : items) {
      acc = add(acc, x);
    }
    return acc;
  }

  private static boolean isInt(Object v) {
    return v instanceof Long || v instanceof BigInteger || v instanceof Boolean || v instanceof Integer;
  }

  private static boolean isNumber(Object v) {
    return isInt(v) || v instanceof Double;
  }

  private static BigInteger bigInt(Object v) {
    if (v instanceof Boolean) {
      return ((Boolean) v) ? BigInteger.ONE : BigInteger.ZERO;
    }
    if (v instanceof BigInteger) {
      return (BigInteger) v;
    }
    return BigInteger.valueOf(((Number) v).longValue());
  }

  private static double toDouble(Object v) {
    if (v instanceof Double) {
      return (Double) v;
    }
    return bigInt(v).doubleValue();
  }

  private static Object intValue(BigInteger b) {
    return b.bitLength() < 64 ? (Object) b.longValue() : b;
  }

  @SuppressWarnings("unchecked")
  static Object add(Object a, Object b) throws PyError {
    if (isNumber(a) && isNumber(b)) {
      if (a instanceof Double || b instanceof Double) {
        return toDouble(a) + toDouble(b);
      }
      return intValue(bigInt(a).add(bigInt(b)));
    }
    if (a instanceof String && b instanceof String) {
      return (String) a + b;
    }
    if (a instanceof List && b instanceof List) {
      List<Object> out = new ArrayList<>((List<Object>) a);
      out.addAll((List<Object>) b);
      return out;
    }
    if (a instanceof String) {
      throw new PyError("can only concatenate str (not \"" + Json.typeName(b) + "\") to str");
    }
    if (a instanceof List) {
      throw new PyError("can only concatenate list (not \"" + Json.typeName(b) + "\") to list");
    }
    throw new PyError("unsupported operand type(s) for +: '" + Json.typeName(a) + "' and '"
        + Json.typeName(b) + "'");
  }

  private static Object sub(Object a, Object b) throws PyError {
    if (isNumber(a) && isNumber(b)) {
      if (a instanceof Double || b instanceof Double) {
        return toDouble(a) - toDouble(b);
      }
      return intValue(bigInt(a).subtract(bigInt(b)));
    }
    throw new PyError("unsupported operand type(s) for -: '" + Json.typeName(a) + "' and '"
        + Json.typeName(b) + "'");
  }

  /** Exact comparison of two Python numbers: negative, zero, positive; null if a NaN is involved. */
  private static Integer compareNumbers(Object a, Object b) {
    if (a instanceof Double || b instanceof Double) {
      double x = toDouble(a);
      double y = toDouble(b);
      if (Double.isNaN(x) || Double.isNaN(y)) {
        return null;
      }
      if (Double.isInfinite(x) || Double.isInfinite(y)) {
        if (a instanceof Double && b instanceof Double) {
          return Double.compare(x, y) == 0 ? 0 : (x < y ? -1 : 1);
        }
        double inf = Double.isInfinite(x) ? x : y;
        int sign = inf > 0 ? 1 : -1;
        return Double.isInfinite(x) ? sign : -sign;
      }
      BigDecimal bx = a instanceof Double ? new BigDecimal(x) : new BigDecimal(bigInt(a));
      BigDecimal by = b instanceof Double ? new BigDecimal(y) : new BigDecimal(bigInt(b));
      return bx.compareTo(by);
    }
    return bigInt(a).compareTo(bigInt(b));
  }

  static int compareCodePoints(String a, String b) {
    int i = 0;
    int j = 0;
    while (i < a.length() && j < b.length()) {
      int ca = a.codePointAt(i);
      int cb = b.codePointAt(j);
      if (ca != cb) {
        return Integer.compare(ca, cb);
      }
      i += Character.charCount(ca);
      j += Character.charCount(cb);
    }
    return Integer.compare(a.length() - i, b.length() - j);
  }

  @SuppressWarnings("unchecked")
  private static boolean compare(Object a, Object b, String op) throws PyError {
    if (isNumber(a) && isNumber(b)) {
      Integer c = compareNumbers(a, b);
      return c != null && (op.equals("<") ? c < 0 : c <= 0);
    }
    if (a instanceof String && b instanceof String) {
      int c = compareCodePoints((String) a, (String) b);
      return op.equals("<") ? c < 0 : c <= 0;
    }
    if (a instanceof List && b instanceof List) {
      List<Object> x = (List<Object>) a;
      List<Object> y = (List<Object>) b;
      int n = Math.min(x.size(), y.size());
      for (int i = 0; i < n; i++) {
        if (!pyEquals(x.get(i), y.get(i))) {
          return compare(x.get(i), y.get(i), op); // Python compares the first differing items with op
        }
      }
      return op.equals("<") ? x.size() < y.size() : x.size() <= y.size();
    }
    throw new PyError("'" + op + "' not supported between instances of '" + Json.typeName(a) + "' and '"
        + Json.typeName(b) + "'");
  }

  /** Python ==, deep, for JSON values (1 == 1.0 == True). */
  @SuppressWarnings("unchecked")
  static boolean pyEquals(Object a, Object b) {
    if (a == null || b == null) {
      return a == b;
    }
    if (isNumber(a) && isNumber(b)) {
      Integer c = compareNumbers(a, b);
      return c != null && c == 0;
    }
    if (a instanceof String && b instanceof String) {
      return a.equals(b);
    }
    if (a instanceof List && b instanceof List) {
      List<Object> x = (List<Object>) a;
      List<Object> y = (List<Object>) b;
      if (x.size() != y.size()) {
        return false;
      }
      Iterator<Object> ix = x.iterator();
      Iterator<Object> iy = y.iterator();
      while (ix.hasNext()) {
        if (!pyEquals(ix.next(), iy.next())) {
          return false;
        }
      }
      return true;
    }
    if (a instanceof Map && b instanceof Map) {
      Map<String, Object> x = (Map<String, Object>) a;
      Map<String, Object> y = (Map<String, Object>) b;
      if (!x.keySet().equals(y.keySet())) {
        return false;
      }
      for (Map.Entry<String, Object> e : x.entrySet()) {
        if (!pyEquals(e.getValue(), y.get(e.getKey()))) {
          return false;
        }
      }
      return true;
    }
    return false;
  }
}

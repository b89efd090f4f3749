// Dumps the protobuf message schema compiled into the durabletask Java SDK jar
// (io.dapr.durabletask.implementation.protobuf.OrchestratorService) as JSON in the format of
// conformance/drift/dump_python.py: {"<message full name>": {"<number>": [name, type, label]}}.
// Compiled and run by `python -m conformance.drift` against .tools/java-driver/lib/*.jar.
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.Descriptors.OneofDescriptor;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

public final class DriftDump {
  private static String q(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }

  private static String type(FieldDescriptor f) {
    switch (f.getJavaType()) {
      case MESSAGE:
        if (f.isMapField()) {
          Descriptor e = f.getMessageType();
          return "map<" + type(e.findFieldByName("key")) + "," + type(e.findFieldByName("value")) + ">";
        }
        return f.getMessageType().getFullName();
      case ENUM:
        return f.getEnumType().getFullName();
      default:
        return f.getType().name().toLowerCase();
    }
  }

  private static String label(FieldDescriptor f) {
    if (f.isMapField()) return "";
    if (f.isRepeated()) return "repeated";
    OneofDescriptor o = f.getContainingOneof();
    if (o != null) {
      if (o.isSynthetic()) return "optional";
      return "oneof:" + o.getName();
    }
    if (f.isRequired()) return "required";
    return "";
  }

  private static void dump(Descriptor d, Map<String, String> out) {
    if (d.getOptions().getMapEntry()) return;
    TreeMap<Integer, String> fields = new TreeMap<>();
    for (FieldDescriptor f : d.getFields()) {
      fields.put(f.getNumber(), "[" + q(f.getName()) + "," + q(type(f)) + "," + q(label(f)) + "]");
    }
    List<String> parts = new ArrayList<>();
    for (Map.Entry<Integer, String> e : fields.entrySet()) parts.add(q(e.getKey().toString()) + ":" + e.getValue());
    out.put(d.getFullName(), "{" + String.join(",", parts) + "}");
    for (Descriptor n : d.getNestedTypes()) dump(n, out);
  }

  public static void main(String[] args) throws Exception {
    String cls = args.length > 0 ? args[0] : "io.dapr.durabletask.implementation.protobuf.OrchestratorService";
    FileDescriptor fd = (FileDescriptor) Class.forName(cls).getMethod("getDescriptor").invoke(null);
    TreeMap<String, String> out = new TreeMap<>();
    for (Descriptor d : fd.getMessageTypes()) dump(d, out);
    List<String> parts = new ArrayList<>();
    for (Map.Entry<String, String> e : out.entrySet()) parts.add(q(e.getKey()) + ":" + e.getValue());
    System.out.println("{\n" + String.join(",\n", parts) + "\n}");
  }
}

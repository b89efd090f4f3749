package taskhub.driver;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.reflect.Constructor;
import java.util.HashMap;
import java.util.Map;

/**
 * Exception classes with exactly the names the program language asks for.
 *
 * <p>The SDK reports a failure's {@code errorType} as the failing exception's class name
 * ({@code FailureDetails(Exception)} and {@code ActivityRunner} use {@code getClass().getName()}).
 * So the {@code fail} step's {@code type}, and the built-in activities' {@code ActivityFailure} /
 * {@code LedgerMissing} / ..., are thrown as instances of a class of that very name, defined at
 * run time ({@code public class NAME extends RuntimeException { NAME(String m) { super(m); } }}),
 * the way the dapr-ext-workflow driver makes Python classes with {@code type(name, ...)}.
 * A name that cannot be a JVM class name (empty, with ';', '[' or '/', an empty segment, or
 * in the prohibited {@code java.*} packages) cannot be expressed: see {@link #check}.
 */
final class ErrorClasses {
  private ErrorClasses() {}

  private static final Map<String, Constructor<? extends RuntimeException>> CACHE = new HashMap<>();
  private static final Loader LOADER = new Loader(ErrorClasses.class.getClassLoader());

  private static final class Loader extends ClassLoader {
    Loader(ClassLoader parent) {
      super(parent);
    }

    Class<?> define(String name, byte[] bytes) {
      return defineClass(name, bytes, 0, bytes.length);
    }
  }

  /** Why {@code name} cannot be an exception class name, or null if it can. */
  static String check(String name) {
    if (name.isEmpty()) {
      return "an empty error type cannot be a Java class name";
    }
    for (String bad : new String[] {";", "[", "/"}) {
      if (name.contains(bad)) {
        return "error type '" + name + "' contains '" + bad + "', which a Java class name cannot";
      }
    }
    if (name.startsWith(".") || name.endsWith(".") || name.contains("..")) {
      return "error type '" + name + "' has an empty package segment, which a Java class name cannot";
    }
    if (name.equals("java") || name.startsWith("java.")) {
      return "error type '" + name + "' is in the prohibited package java.*";
    }
    try {
      constructor(name);
    } catch (RuntimeException | LinkageError e) {
      return "error type '" + name + "' cannot be defined as a Java class: " + e;
    }
    return null;
  }

  /** A new exception of class {@code name} with {@code message}. */
  static RuntimeException newError(String name, String message) {
    try {
      return constructor(name).newInstance(message);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot instantiate error class " + name, e);
    }
  }

  private static synchronized Constructor<? extends RuntimeException> constructor(String name) {
    Constructor<? extends RuntimeException> ctor = CACHE.get(name);
    if (ctor == null) {
      Class<?> cls = LOADER.define(name, classFile(name.replace('.', '/')));
      try {
        ctor = cls.asSubclass(RuntimeException.class).getConstructor(String.class);
      } catch (NoSuchMethodException e) {
        throw new IllegalStateException(e);
      }
      CACHE.put(name, ctor);
    }
    return ctor;
  }

  /** The class file of {@code public class NAME extends RuntimeException { public NAME(String m) { super(m); } }}. */
  private static byte[] classFile(String internalName) {
    try {
      ByteArrayOutputStream buf = new ByteArrayOutputStream();
      DataOutputStream out = new DataOutputStream(buf);
      out.writeInt(0xCAFEBABE);
      out.writeShort(0); // minor
      out.writeShort(52); // major: Java 8 (no stack map frames needed for straight-line code)
      out.writeShort(10); // constant pool count (entries 1..9)
      out.writeByte(1); out.writeUTF(internalName); // #1
      out.writeByte(7); out.writeShort(1); // #2 Class #1
      out.writeByte(1); out.writeUTF("java/lang/RuntimeException"); // #3
      out.writeByte(7); out.writeShort(3); // #4 Class #3
      out.writeByte(1); out.writeUTF("<init>"); // #5
      out.writeByte(1); out.writeUTF("(Ljava/lang/String;)V"); // #6
      out.writeByte(12); out.writeShort(5); out.writeShort(6); // #7 NameAndType
      out.writeByte(10); out.writeShort(4); out.writeShort(7); // #8 Methodref RuntimeException.<init>(String)
      out.writeByte(1); out.writeUTF("Code"); // #9
      out.writeShort(0x0021); // ACC_PUBLIC | ACC_SUPER
      out.writeShort(2); // this
      out.writeShort(4); // super
      out.writeShort(0); // interfaces
      out.writeShort(0); // fields
      out.writeShort(1); // methods
      out.writeShort(0x0001); // public
      out.writeShort(5); // <init>
      out.writeShort(6); // (String)V
      out.writeShort(1); // attributes: Code
      out.writeShort(9);
      byte[] code = {0x2a, 0x2b, (byte) 0xb7, 0x00, 0x08, (byte) 0xb1}; // aload_0 aload_1 invokespecial #8 return
      out.writeInt(2 + 2 + 4 + code.length + 2 + 2);
      out.writeShort(2); // max stack
      out.writeShort(2); // max locals
      out.writeInt(code.length);
      out.write(code);
      out.writeShort(0); // exception table
      out.writeShort(0); // code attributes
      out.writeShort(0); // class attributes
      out.flush();
      return buf.toByteArray();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }
}

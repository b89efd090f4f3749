// Command drift-dump prints the protobuf message schema compiled into
// github.com/dapr/durabletask-go/api/protos (the version pinned in go.mod), as JSON in the
// format of conformance/drift/dump_python.py:
//
//	{"<message full name>": {"<number>": [name, type, label]}}
//
// Build and run with `python -m conformance.drift` (project-local Go caches under .tools/).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"

	_ "github.com/dapr/durabletask-go/api/protos"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

func typeName(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if f.IsMap() {
			return fmt.Sprintf("map<%s,%s>", typeName(f.MapKey()), typeName(f.MapValue()))
		}
		return string(f.Message().FullName())
	case protoreflect.EnumKind:
		return string(f.Enum().FullName())
	default:
		return f.Kind().String()
	}
}

func label(f protoreflect.FieldDescriptor) string {
	if f.IsList() || f.IsMap() {
		if f.IsMap() {
			return ""
		}
		return "repeated"
	}
	if o := f.ContainingOneof(); o != nil {
		if o.IsSynthetic() {
			return "optional"
		}
		return "oneof:" + string(o.Name())
	}
	if f.Cardinality() == protoreflect.Required {
		return "required"
	}
	return ""
}

func dump(md protoreflect.MessageDescriptor, out map[string]map[string][3]string) {
	if md.IsMapEntry() {
		return
	}
	fields := map[string][3]string{}
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		f := fs.Get(i)
		fields[strconv.Itoa(int(f.Number()))] = [3]string{string(f.Name()), typeName(f), label(f)}
	}
	out[string(md.FullName())] = fields
	ms := md.Messages()
	for i := 0; i < ms.Len(); i++ {
		dump(ms.Get(i), out)
	}
}

func main() {
	out := map[string]map[string][3]string{}
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if fd.Package() != "" { // the durabletask protos are unpackaged; skip google.protobuf etc.
			return true
		}
		ms := fd.Messages()
		for i := 0; i < ms.Len(); i++ {
			dump(ms.Get(i), out)
		}
		return true
	})
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

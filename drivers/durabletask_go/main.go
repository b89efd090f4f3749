// Command durabletask-go-driver: the program language (docs/programs.md) interpreted with the Go
// worker of github.com/dapr/durabletask-go v0.14.0 (packages client and task).
//
// Usage:
//
//	durabletask-go-driver --sidecar HOST:PORT --canonical programs.canonical.json [--ledger FILE] [--debug]
//
// The programs come in the canonical form the harness writes as {canonical} (canonical.go). Every
// program becomes a durabletask-go workflow (versioned programs through
// TaskRegistry.AddVersionedWorkflowN, the default version as latest) whose body walks the steps
// with task.WorkflowContext; the built-in activities echo, fail, sleep and record are registered
// as activities. The worker is client.NewTaskHubGrpcClient(conn, logger).StartWorkItemListener.
//
// A step durabletask-go cannot express makes the driver refuse to start (exit 3), with a message
// naming the step by its path; nothing is emulated behind the SDK's back.
//
// Prints "connected to HOST:PORT" once the work-item stream is open; stops cleanly on SIGTERM or
// SIGINT. Exit codes: 0 stopped, 2 usage error or not the canonical form, 3 capability gap, 4 could not connect.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/dapr/durabletask-go/client"
	"github.com/dapr/durabletask-go/task"
)

const (
	exitUsage   = 2
	exitGap     = 3
	exitConnect = 4
	sdkModule   = "github.com/dapr/durabletask-go"
)

// sdkVersion names the durabletask-go release this binary links (the version matrix builds the driver
// against older releases too), read from the build's module list rather than assumed to be the pin.
func sdkVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == sdkModule {
				if m.Replace != nil {
					return sdkModule + " " + m.Version + " (replaced by " + m.Replace.Path + ")"
				}
				return sdkModule + " " + m.Version
			}
		}
	}
	return sdkModule + " (version unknown: no build info)"
}

func die(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "durabletask-go-driver: error: "+format+"\n", args...)
	os.Exit(code)
}

func info(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "durabletask-go-driver: "+format+"\n", args...)
}

// sdkLogger sends the SDK's log lines to stderr (stdout carries only the ready line); debug lines
// only with --debug.
type sdkLogger struct {
	out   *log.Logger
	debug bool
}

func (l *sdkLogger) Debug(v ...any) {
	if l.debug {
		l.out.Print(append([]any{"DEBUG: "}, v...)...)
	}
}
func (l *sdkLogger) Debugf(f string, v ...any) {
	if l.debug {
		l.out.Printf("DEBUG: "+f, v...)
	}
}
func (l *sdkLogger) Info(v ...any)             { l.out.Print(append([]any{"INFO: "}, v...)...) }
func (l *sdkLogger) Infof(f string, v ...any)  { l.out.Printf("INFO: "+f, v...) }
func (l *sdkLogger) Warn(v ...any)             { l.out.Print(append([]any{"WARNING: "}, v...)...) }
func (l *sdkLogger) Warnf(f string, v ...any)  { l.out.Printf("WARNING: "+f, v...) }
func (l *sdkLogger) Error(v ...any)            { l.out.Print(append([]any{"ERROR: "}, v...)...) }
func (l *sdkLogger) Errorf(f string, v ...any) { l.out.Printf("ERROR: "+f, v...) }

// register adds every program (and version) and the built-in activities to a fresh registry.
func register(programs Programs, runner *activityRunner) (*task.TaskRegistry, []string, error) {
	reg := task.NewTaskRegistry()
	var names []string
	for name, f := range programs {
		for _, v := range f.Versions {
			if f.Default == nil {
				if err := reg.AddWorkflowN(name, makeWorkflow(v.Steps)); err != nil {
					return nil, nil, err
				}
				names = append(names, name)
				continue
			}
			latest := *v.Name == *f.Default
			if err := reg.AddVersionedWorkflowN(name, *v.Name, latest, makeWorkflow(v.Steps)); err != nil {
				return nil, nil, err
			}
			label := name + "@" + *v.Name
			if latest {
				label += " (latest)"
			}
			names = append(names, label)
		}
	}
	if err := runner.register(reg); err != nil {
		return nil, nil, err
	}
	sort.Strings(names)
	return reg, names, nil
}

// apiToken attaches DAPR_API_TOKEN as dapr-api-token metadata, as the Dapr Go SDK's client does
// for the connection it hands to durabletask-go (durabletask-go itself leaves that to the caller).
func apiToken(token string) (grpc.UnaryClientInterceptor, grpc.StreamClientInterceptor) {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, "dapr-api-token", token), method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(metadata.AppendToOutgoingContext(ctx, "dapr-api-token", token), desc, cc, method, opts...)
	}
	return unary, stream
}

func main() {
	fs := flag.NewFlagSet("durabletask-go-driver", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	sidecar := fs.String("sidecar", "", "the sidecar's gRPC address, HOST:PORT (required)")
	canonical := fs.String("canonical", "", "the programs in the canonical form, a .json file (required)")
	ledger := fs.String("ledger", "", "ledger file for the record activity (default: $CONFORMANCE_LEDGER)")
	readyTimeout := fs.Duration("ready-timeout", 30*time.Second, "how long to keep trying to open the work-item stream")
	debug := fs.Bool("debug", false, "also print the SDK's debug log lines (stderr)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(exitUsage)
	}
	if fs.NArg() > 0 {
		die(exitUsage, "unexpected arguments %v", fs.Args())
	}
	if *sidecar == "" || *canonical == "" {
		die(exitUsage, "--sidecar HOST:PORT and --canonical FILE are required")
	}
	if host, port, err := net.SplitHostPort(*sidecar); err != nil || host == "" || port == "" {
		die(exitUsage, "--sidecar %q is not HOST:PORT", *sidecar)
	}

	programs, err := readPrograms(*canonical)
	if err != nil {
		die(exitUsage, "%v", err)
	}
	if gaps := capabilityGaps(programs); len(gaps) > 0 {
		die(exitGap, "the programs use steps %s cannot express (declared capability gap; refusing to start):\n%s",
			sdkVersion(), indent(gaps))
	}

	tracker := newInstanceTracker()
	runner := newActivityRunner(*ledger, tracker)
	reg, names, err := register(programs, runner)
	if err != nil {
		die(exitUsage, "cannot register the programs: %v", err)
	}
	info("%s; registered %s", sdkVersion(), strings.Join(names, ", "))

	dialOpts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	streamInterceptors := []grpc.StreamClientInterceptor{tracker.streamInterceptor}
	if token := os.Getenv("DAPR_API_TOKEN"); token != "" {
		unary, stream := apiToken(token)
		dialOpts = append(dialOpts, grpc.WithChainUnaryInterceptor(unary))
		streamInterceptors = append([]grpc.StreamClientInterceptor{stream}, streamInterceptors...)
	}
	dialOpts = append(dialOpts, grpc.WithChainStreamInterceptor(streamInterceptors...))
	conn, err := grpc.NewClient(*sidecar, dialOpts...)
	if err != nil {
		die(exitConnect, "cannot create a gRPC client for %s: %v", *sidecar, err)
	}
	defer conn.Close()
	logger := &sdkLogger{out: log.New(os.Stderr, "durabletask-go: ", log.LstdFlags|log.Lmicroseconds), debug: *debug}
	worker := client.NewTaskHubGrpcClient(conn, logger)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	// StartWorkItemListener says Hello and opens GetWorkItems before it returns; retry until the
	// sidecar answers or --ready-timeout passes (the sidecar may still be starting).
	deadline := time.Now().Add(*readyTimeout)
	var cancel context.CancelFunc
	for {
		var ctx context.Context
		ctx, cancel = context.WithCancel(context.Background())
		err = worker.StartWorkItemListener(ctx, reg)
		if err == nil {
			break
		}
		cancel()
		if time.Now().After(deadline) {
			die(exitConnect, "cannot connect to the sidecar at %s: %v", *sidecar, err)
		}
		select {
		case <-stop:
			info("stopped before connecting")
			os.Exit(0)
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Printf("connected to %s\n", *sidecar)
	os.Stdout.Sync()

	<-stop
	cancel()
	info("stopped")
}

func indent(lines []string) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = "  - " + l
	}
	return strings.Join(out, "\n")
}

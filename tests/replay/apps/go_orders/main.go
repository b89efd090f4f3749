// Command go_orders: the order application of dx_orders.py on the Go SDK
// (github.com/dapr/durabletask-go v0.14.0, packages client and task), for `conformance replay`.
//
//	go_orders serve  --address HOST:PORT --version v1|v2|v2-patched|renamed
//	go_orders record --address HOST:PORT --version v1
//
// Versions of `order`: v1 reserve, wait for "approve", charge; v2 an `audit` activity after
// reserve; v2-patched the same behind ctx.IsPatched("audit"); renamed: v1 registered as
// "order_v2" only. `record` prints one JSON line with the instance ids.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dapr/durabletask-go/api"
	"github.com/dapr/durabletask-go/api/protos"
	"github.com/dapr/durabletask-go/backend"
	"github.com/dapr/durabletask-go/client"
	"github.com/dapr/durabletask-go/task"
)

func activity(prefix string) task.Activity {
	return func(ctx task.ActivityContext) (any, error) {
		var in string
		if err := ctx.GetInput(&in); err != nil {
			return nil, err
		}
		return prefix + in, nil
	}
}

func order(withAudit func(ctx *task.WorkflowContext) bool) task.Workflow {
	return func(ctx *task.WorkflowContext) (any, error) {
		var item string
		if err := ctx.GetInput(&item); err != nil {
			return nil, err
		}
		var r, c string
		if err := ctx.CallActivity("reserve", task.WithActivityInput(item)).Await(&r); err != nil {
			return nil, err
		}
		if withAudit(ctx) {
			if err := ctx.CallActivity("audit", task.WithActivityInput(r)).Await(nil); err != nil {
				return nil, err
			}
		}
		ctx.SetCustomStatus("waiting")
		if err := ctx.WaitForSingleEvent("approve", -1).Await(nil); err != nil {
			return nil, err
		}
		if err := ctx.CallActivity("charge", task.WithActivityInput(r)).Await(&c); err != nil {
			return nil, err
		}
		return map[string]string{"reserved": r, "charged": c}, nil
	}
}

var versions = map[string]struct {
	name string
	wf   task.Workflow
}{
	"v1":         {"order", order(func(*task.WorkflowContext) bool { return false })},
	"v2":         {"order", order(func(*task.WorkflowContext) bool { return true })},
	"v2-patched": {"order", order(func(ctx *task.WorkflowContext) bool { return ctx.IsPatched("audit") })},
	"renamed":    {"order_v2", order(func(*task.WorkflowContext) bool { return false })},
}

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go_orders: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "serve" && os.Args[1] != "record") {
		fmt.Fprintln(os.Stderr, "usage: go_orders serve|record --address HOST:PORT [--version V]")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	address := fs.String("address", "", "sidecar HOST:PORT")
	version := fs.String("version", "v1", "v1, v2, v2-patched or renamed")
	_ = fs.Parse(os.Args[2:])
	v, ok := versions[*version]
	if *address == "" || !ok {
		fmt.Fprintln(os.Stderr, "go_orders: --address is required and --version must be v1, v2, v2-patched or renamed")
		os.Exit(2)
	}
	reg := task.NewTaskRegistry()
	must(reg.AddWorkflowN(v.name, v.wf))
	must(reg.AddActivityN("reserve", activity("reserved:")))
	must(reg.AddActivityN("audit", activity("audited:")))
	must(reg.AddActivityN("charge", activity("charged:")))

	conn, err := grpc.NewClient(*address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		die("cannot create a gRPC client for %s: %v", *address, err)
	}
	defer conn.Close()
	c := client.NewTaskHubGrpcClient(conn, backend.DefaultLogger())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err = c.StartWorkItemListener(ctx, reg); err == nil {
			break
		}
		if time.Now().After(deadline) {
			die("cannot connect to %s: %v", *address, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if mode == "serve" {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		return
	}
	record(ctx, c)
}

func must(err error) {
	if err != nil {
		die("%v", err)
	}
}

func record(ctx context.Context, c *client.TaskHubGrpcClient) {
	done, waiting := api.InstanceID("order-done-0"), api.InstanceID("order-waiting-0")
	for _, id := range []api.InstanceID{done, waiting} {
		if _, err := c.ScheduleNewWorkflow(ctx, "order", api.WithInstanceID(id), api.WithInput("item-0")); err != nil {
			die("start %s: %v", id, err)
		}
	}
	for _, id := range []api.InstanceID{done, waiting} {
		end := time.Now().Add(60 * time.Second)
		for {
			md, err := c.FetchWorkflowMetadata(ctx, id, api.WithFetchPayloads(true))
			if err == nil && md.GetCustomStatus() != nil &&
				(md.GetCustomStatus().GetValue() == "waiting" || md.GetCustomStatus().GetValue() == `"waiting"`) {
				break
			}
			if time.Now().After(end) {
				die("%s never reached its wait", id)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := c.RaiseEvent(ctx, done, "approve", api.WithEventPayload(true)); err != nil {
		die("raise: %v", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	md, err := c.WaitForWorkflowCompletion(wctx, done)
	if err != nil || md.GetRuntimeStatus() != protos.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED {
		die("%s did not complete: %v %v", done, md, err)
	}
	out, _ := json.Marshal(map[string][]string{"completed": {string(done)}, "running": {string(waiting)}})
	fmt.Println(string(out))
}

package client_test

// The examples talk to the daemon in AIRLOCK_HOST, as programs do; under `go test` that is the
// fake daemon of package clienttest, started by TestMain.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// Create a sandbox, run a command in it to completion and terminate it.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.FromEnv() // AIRLOCK_HOST, AIRLOCK_TOKEN
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Create(ctx, api.Spec{
		Name:      "example",
		Isolation: api.LevelProcess,
		Resources: api.Resources{MemoryMB: 512},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if _, err := c.Terminate(context.Background(), sb.ID); err != nil {
			log.Print(err)
		}
	}()

	res, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell("echo hello from the sandbox"), Timeout: 30})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
	fmt.Println("exit code", res.ExitCode, "timed out", res.TimedOut)
	// Output:
	// hello from the sandbox
	// exit code 0 timed out false
}

// The daemon's refusals are *client.Error values that errors.Is matches against the sentinels;
// a refused field is named.
func Example_errors() {
	ctx := context.Background()
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Create(ctx, api.Spec{Resources: api.Resources{MemoryMB: 1 << 20}})
	if e, ok := errors.AsType[*client.Error](err); ok && errors.Is(err, client.ErrInvalidArgument) {
		fmt.Println("refused field:", e.Field)
	}
	_, err = c.Get(ctx, "sbx_does_not_exist")
	fmt.Println("not found:", errors.Is(err, client.ErrNotFound))
	// Output:
	// refused field: resources.memoryMb
	// not found: true
}

// Upload a file, list its directory and read it back. Both directions stream.
func ExampleClient_WriteFile() {
	ctx := context.Background()
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Create(ctx, api.Spec{})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if _, err := c.Terminate(ctx, sb.ID); err != nil {
			log.Print(err)
		}
	}()

	script := strings.NewReader("print('hi')\n") // an *os.File streams the same way
	if _, err := c.WriteFile(ctx, sb.ID, "/workspace/app/main.py", script, 0o644); err != nil {
		log.Fatal(err)
	}
	files, err := c.ListFiles(ctx, sb.ID, "/workspace/app")
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range files {
		fmt.Println(f.Name, f.Type, f.Size, f.Mode)
	}
	rc, err := c.ReadFile(ctx, sb.ID, "/workspace/app/main.py")
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.Copy(os.Stdout, rc); err != nil {
		log.Fatal(err)
	}
	// Output:
	// main.py file 12 0644
	// print('hi')
}

// Run a command interactively: stdin is streamed in and output streamed out as it comes.
// A terminal program would set start.TTY, pass its window size and send Resize on SIGWINCH.
func ExampleClient_ExecInteractive() {
	ctx := context.Background()
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Create(ctx, api.Spec{})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if _, err := c.Terminate(ctx, sb.ID); err != nil {
			log.Print(err)
		}
	}()

	start := api.ExecStart{ExecRequest: api.ExecRequest{Command: api.Command{"cat"}}}
	res, err := c.ExecInteractive(ctx, sb.ID, start, client.Stdio{
		Stdin:  strings.NewReader("typed into cat\n"),
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code", res.ExitCode)
	// Output:
	// typed into cat
	// exit code 0
}

// Follow a sandbox's log until it is terminated.
func ExampleClient_Logs() {
	ctx := context.Background()
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Create(ctx, api.Spec{})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		if _, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell("echo working")}); err != nil {
			log.Print(err)
		}
		if _, err := c.Terminate(ctx, sb.ID); err != nil {
			log.Fatal(err) // the log below follows until the sandbox ends
		}
	}()
	err = c.Logs(ctx, sb.ID, client.LogOptions{Follow: true}, func(e api.LogEntry) error {
		switch e.Stream {
		case api.StreamStdout, api.StreamStderr:
			fmt.Printf("%s: %s", e.Stream, e.Data)
		case api.StreamEvent:
			if e.Event.Type == api.EventSandboxStatus {
				fmt.Println("status:", e.Event.Data["to"])
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// status: ready
	// status: running
	// stdout: working
	// status: terminated
}

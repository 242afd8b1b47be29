package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/pgembed"
)

// maxConnections holds two packages' tests at once, or the end-to-end
// tier's replicas, each with its own pool.
const maxConnections = 400

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: withpostgres [--] command [arg...]")
		os.Exit(2)
	}
	code, err := run(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "withpostgres: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func run(args []string) (int, error) {
	dir, err := os.MkdirTemp("", "turngate-withpostgres-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	pg, err := pgembed.Start(context.Background(), pgembed.Options{Dir: dir, MaxConnections: maxConnections})
	if err != nil {
		return 1, err
	}
	defer pg.Stop()

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), dbtest.EnvDatabaseURL+"="+pg.URL("postgres"))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		return 1, err
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	signal.Stop(sigs)
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		return exit.ExitCode(), nil // the command said why
	}
	if err != nil {
		return 1, err
	}
	return 0, pg.Stop()
}

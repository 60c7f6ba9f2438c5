package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/casebook/casebook/internal/buildinfo"
)

// errUsage: the command line names no command or an unknown one (exit 2, usage on stderr).
var errUsage = errors.New("usage")

// required marks a flag's usage text: parseFlags refuses an empty value, naming the flag.
const required = "(required) "

// parseFlags parses args into fs, then refuses positional arguments and missing required flags
// (those whose usage starts with required). -h and --help return flag.ErrHelp: usage printed, exit 0.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", strings.TrimPrefix(fs.Name(), "casebook "), fs.Arg(0))
	}
	var missing []string
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, required) && f.Value.String() == "" {
			missing = append(missing, "--"+f.Name)
		}
	})
	if len(missing) > 0 {
		return fmt.Errorf("%s: missing required flag %s", strings.TrimPrefix(fs.Name(), "casebook "), strings.Join(missing, ", "))
	}
	return nil
}

// leafCommands take flags directly; the other commands are groups of subcommands.
var leafCommands = map[string]bool{"serve": true, "migrate": true, "replay": true, "bench": true, "version": true, "erase": true, "export": true}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// groupHelp prints the usage lines of a command group (every line of usage for cmd's subcommands).
func groupHelp(w io.Writer, cmd string) bool {
	var lines []string
	keep := false
	for _, l := range strings.Split(usage, "\n") {
		switch {
		case strings.HasPrefix(l, "  "+cmd+" "):
			keep = true
		case strings.HasPrefix(l, "    "):
			// a continuation line keeps the previous line's state
		default:
			keep = false
		}
		if keep {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return false
	}
	fmt.Fprintf(w, "usage:\n%s\n\nRun 'casebook %s <subcommand> -h' for its flags.\n", strings.Join(lines, "\n"), cmd)
	return true
}

// version prints the build: version, commit and Go version.
func version(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("casebook version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return printJSON(stdout, buildinfo.Read())
}

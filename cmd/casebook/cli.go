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

// errReported: the command has already said what failed (serve logs it as a JSON line); exit 1.
var errReported = errors.New("reported")

// usageError is a command line that cannot be run as written: a flag that does not parse, a
// missing required flag, a stray argument (exit 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usagef is a usageError.
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// required marks a flag's usage text: parseFlags refuses an empty value, naming the flag.
const required = "(required) "

// parseFlags parses args into fs, then refuses positional arguments and missing required flags
// (those whose usage starts with required). -h and --help return flag.ErrHelp: usage printed, exit 0.
// A flag it cannot parse is refused in one line that points to the command's -h, not with the
// whole usage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		if fs.Usage != nil {
			fs.Usage()
		} else {
			fmt.Fprintf(out, "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
		return err
	}
	if err != nil {
		return usagef("%s: %w; run '%s -h' for its flags", strings.TrimPrefix(fs.Name(), "casebook "), err, fs.Name())
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", strings.TrimPrefix(fs.Name(), "casebook "), fs.Arg(0))
	}
	var missing []string
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, required) && f.Value.String() == "" {
			missing = append(missing, "--"+f.Name)
		}
	})
	if len(missing) > 0 {
		return usagef("%s: missing required flag %s", strings.TrimPrefix(fs.Name(), "casebook "), strings.Join(missing, ", "))
	}
	return nil
}

// leafCommands take flags directly; the other commands are groups of subcommands.
var leafCommands = map[string]bool{"serve": true, "migrate": true, "replay": true, "bench": true, "version": true, "erase": true, "export": true,
	"backup": true, "restore": true}

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

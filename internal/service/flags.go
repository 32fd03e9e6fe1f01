package service

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Flags declares command-line flags that each have an environment twin, COLLAB_ and the flag's
// name in upper case with dashes as underscores (--rate-limit: COLLAB_RATE_LIMIT). The flag
// wins over the environment, the environment over the default. Every flag of the process, the
// platform's and each service's, is declared through one Flags, so the rule holds everywhere.
type Flags struct {
	fs      *flag.FlagSet
	getenv  func(string) string
	errs    []error
	secrets map[string]*string // flag name -> value, applied from the environment by Finish
}

// NewFlags returns Flags declaring on fs and reading the environment through getenv.
func NewFlags(fs *flag.FlagSet, getenv func(string) string) *Flags {
	return &Flags{fs: fs, getenv: getenv}
}

// EnvName is the environment twin of a flag.
func EnvName(flagName string) string {
	return "COLLAB_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (f *Flags) initial(name, def string) string {
	if v := f.getenv(EnvName(name)); v != "" {
		return v
	}
	return def
}

func usage(name, text string) string { return text + " (" + EnvName(name) + ")" }

// String declares a string flag.
func (f *Flags) String(name, def, text string) *string {
	return f.fs.String(name, f.initial(name, def), usage(name, text))
}

// Duration declares a duration flag ("5s", "168h").
func (f *Flags) Duration(name string, def time.Duration, text string) *time.Duration {
	v := def
	if s := f.getenv(EnvName(name)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s=%q is not a duration (e.g. 5s, 168h)", EnvName(name), s))
		}
		v = d
	}
	return f.fs.Duration(name, v, usage(name, text))
}

// Secret declares a string flag whose value must never be printed. Its environment value is
// applied after parsing (Finish), not as the flag's default: the flag package prints defaults
// in -h and in the usage it writes after any mistyped flag, into a terminal or a container log.
func (f *Flags) Secret(name, def, text string) *string {
	p := f.fs.String(name, def, usage(name, text))
	if f.secrets == nil {
		f.secrets = map[string]*string{}
	}
	f.secrets[name] = p
	return p
}

// Finish runs once the flags are parsed: secrets given only in the environment take its value,
// and the environment values that could not be read are reported.
func (f *Flags) Finish() error {
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for name, p := range f.secrets {
		if v := f.getenv(EnvName(name)); v != "" && !given[name] {
			*p = v
		}
	}
	return errors.Join(f.errs...)
}

// Func declares a flag whose text parse turns into a value: with the default (or the
// environment's value) at once, and again with the flag's value when one is given. A parse
// error of the environment's value surfaces from Err, of the flag's from the flag set.
func (f *Flags) Func(name, def, text string, parse func(string) error) {
	if err := parse(f.initial(name, def)); err != nil {
		f.errs = append(f.errs, fmt.Errorf("%s: %w", EnvName(name), err))
	}
	f.fs.Func(name, usage(name, text), parse)
}

// ParseSwitch reads an on/off setting as every switch of collabd spells it: true, 1, on or yes;
// false, 0, off, no or empty (any case, surrounding space ignored).
func ParseSwitch(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "on", "yes":
		return true, nil
	case "false", "0", "off", "no", "":
		return false, nil
	}
	return false, fmt.Errorf("want true or false, got %q", v)
}

// IntFunc returns a Flags.Func parser that stores a whole number from min to max (no upper
// bound when max < min) in n, refusing anything else with the bounds in the message: the one
// parser of collabd's counting flags.
func IntFunc(n *int, min, max int) func(string) error {
	return func(v string) error {
		i, err := strconv.Atoi(strings.TrimSpace(v))
		switch {
		case max < min && (err != nil || i < min):
			return fmt.Errorf("want a whole number of %d or more, got %q", min, v)
		case max >= min && (err != nil || i < min || i > max):
			return fmt.Errorf("want a whole number from %d to %d, got %q", min, max, v)
		}
		*n = i
		return nil
	}
}

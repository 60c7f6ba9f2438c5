package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/tenancy"
)

// categoryList collects repeated --category slug=Label flags.
type categoryList struct {
	set  bool
	cats []tenancy.Category
}

func (c *categoryList) String() string { return "" }

func (c *categoryList) Set(v string) error {
	c.set = true
	if v == "" {
		return nil // --category '' clears the list
	}
	slug, label, _ := strings.Cut(v, "=")
	c.cats = append(c.cats, tenancy.Category{Slug: strings.TrimSpace(slug), Label: label})
	return nil
}

// setForm is `tenants set-form`: the public form's display name and category select.
func setForm(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("tenants set-form", stderr)
	slug := fs.String("slug", "", required+"tenant slug")
	name := fs.String("name", "", "display name shown on the public form")
	var cats categoryList
	fs.Var(&cats, "category", "a category as slug=Label (repeat, in display order; --category '' clears them)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tenants set-form: unexpected argument %q", fs.Arg(0))
	}
	var np *string
	if *name != "" {
		n := commands.Normalize(*name, false)
		np = &n
	}
	var list []tenancy.Category
	if cats.set {
		list = append([]tenancy.Category{}, cats.cats...)
		for i := range list {
			list[i].Label = commands.Normalize(list[i].Label, false)
		}
	}
	a, err := sf.open(ctx, logger(stderr))
	if err != nil {
		return err
	}
	defer a.Close()
	p, err := a.Tenancy.SetProfile(ctx, *slug, np, list)
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"slug": *slug, "name": p.Name, "categories": p.Categories})
}

// consoleBase is the console's base URL: the public URL when set, else the listen address.
func consoleBase(public, addr string) string {
	if public != "" {
		return strings.TrimSuffix(public, "/")
	}
	return "http://" + addr
}

// setPortal is `tenants set-portal`: which internal fields the portal reads show requesters. It
// replaces the setting: a flag left out is off.
func setPortal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("tenants set-portal", stderr)
	slug := fs.String("slug", "", required+"tenant slug")
	prio := fs.Bool("show-priority", false, "show requesters the inquiry's priority")
	team := fs.Bool("show-team", false, "show requesters the inquiry's team")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tenants set-portal: unexpected argument %q", fs.Arg(0))
	}
	a, err := sf.open(ctx, logger(stderr))
	if err != nil {
		return err
	}
	defer a.Close()
	v, err := a.Tenancy.SetPortalView(ctx, *slug, tenancy.PortalView{ShowPriority: *prio, ShowTeam: *team})
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"slug": *slug, "show_priority": v.ShowPriority, "show_team": v.ShowTeam})
}

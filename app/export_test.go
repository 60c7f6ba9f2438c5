package app

import "github.com/casebook/casebook/duejobs"

// SetDueDecided installs a hook that runs between a due job's re-read of its inquiry and its
// append.
func SetDueDecided(a *App, f func(duejobs.Job)) { a.dueDecided = f }

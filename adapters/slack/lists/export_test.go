package lists

// SetHooks sets the worker's test hooks: before sends a create, after fails between it and its record.
func SetHooks(w *Worker, before func(), after func() error) {
	w.beforeCreate, w.afterCreate = before, after
}

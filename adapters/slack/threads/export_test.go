package threads

// SetAfterPost installs the crash hook that runs between a root post and its record.
func (w *Worker) SetAfterPost(f func() error) { w.afterPost = f }

package lifecycle

// SetMadeItems makes d call f in every advance that creates items of a for-each task, before
// it commits; an error of f aborts the advance.
func SetMadeItems(d *Driver, f func() error) { d.madeItems = f }

// SetMadeRunWait makes d call f in every advance that creates a workflow sensor, before it
// commits; an error of f aborts the advance.
func SetMadeRunWait(d *Driver, f func() error) { d.madeRunWait = f }

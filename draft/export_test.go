package draft

// HeadThreads returns the threads of an MTP's head context.
func HeadThreads(d *MTP) (n, nBatch int) { return d.c.Threads() }

package storagetest

// errQueue holds the errors FailNext armed, by operation, oldest first, for
// FaultFS and Faulty. Its owner guards it with its mutex.
type errQueue[O comparable] map[O][]error

// push arms err for the next call of op not yet armed.
func (q errQueue[O]) push(op O, err error) { q[op] = append(q[op], err) }

// pop takes the oldest error armed for op; ok is false when none is.
func (q errQueue[O]) pop(op O) (err error, ok bool) {
	armed := q[op]
	if len(armed) == 0 {
		return nil, false
	}
	q[op] = armed[1:]
	return armed[0], true
}

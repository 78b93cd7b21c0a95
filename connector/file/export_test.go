package file

// StagedName returns the staged file name a committable of the sink names.
func StagedName(data []byte) string {
	f, err := decodeStaged(data)
	if err != nil {
		panic(err)
	}
	return f.File
}

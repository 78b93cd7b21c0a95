package file

import "encoding/json"

// jsonMember returns the raw value of the top-level member name of the JSON
// object in data (the last one, as encoding/json would take, when the name
// repeats). It scans without allocating and checks only what it needs to
// skip values: malformed input may give false or a value; decoding the
// line itself is what validates it.
func jsonMember(data []byte, name string) (raw []byte, found bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	i++
	for {
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != '"' {
			return raw, found
		}
		kEnd, ok := skipString(data, i)
		if !ok {
			return raw, found
		}
		match := keyIs(data[i:kEnd], name)
		i = skipSpace(data, kEnd)
		if i >= len(data) || data[i] != ':' {
			return raw, found
		}
		i = skipSpace(data, i+1)
		vEnd, ok := skipValue(data, i)
		if !ok {
			return raw, found
		}
		if match {
			raw, found = data[i:vEnd], true
		}
		i = skipSpace(data, vEnd)
		if i >= len(data) || data[i] != ',' {
			return raw, found
		}
		i++
	}
}

// keyIs compares a quoted JSON key with name.
func keyIs(quoted []byte, name string) bool {
	body := quoted[1 : len(quoted)-1]
	for _, c := range body {
		if c == '\\' {
			var k string
			return json.Unmarshal(quoted, &k) == nil && k == name
		}
	}
	return string(body) == name
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string literal starting at i.
func skipString(data []byte, i int) (int, bool) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index after the value starting at i.
func skipValue(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, ok := skipString(data, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j, j > i
		}
		j++
	}
	return j, j > i
}

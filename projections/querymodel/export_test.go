package querymodel

// Parts and SizeClass are the statement row-count helpers, for tests.
var (
	Parts     = parts
	SizeClass = sizeClass
)

package querymodel

// SizeClass is the statement row-count helper, for tests.
var SizeClass = sizeClass

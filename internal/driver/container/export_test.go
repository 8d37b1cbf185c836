package container

// MaxSpares is maxSpares, for the tests of package container_test.
const MaxSpares = maxSpares

// No declarations: this target only stands in for one object of the static Swift runtime (argv.c).

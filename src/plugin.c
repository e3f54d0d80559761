/* src/plugin.c - opening mgt's libraries at run time (the CUDA backend's, MPI's): where they are looked for, and their interface version */
/* a library's table: dlopen(path), then its getter `symbol`, whose table starts with its version
   (`abi`); NULL with why appended to `why` */
static const void *mgt__dl_table(const char *path, const char *symbol, const char *kind, int abi, const char *target, char *why, size_t cap) {
    typedef const void *(*get_fn)(void);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL), *sym;
    const void *table;
    get_fn get;
    size_t used = strlen(why);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why + used, cap - used, "%s%s", used ? "; " : "", e ? e : path);
        return NULL;
    }
    sym = dlsym(lib, symbol);
    if (!sym) {
        snprintf(why + used, cap - used, "%s%s: not an mgt %s library (no %s)", used ? "; " : "", path, kind, symbol);
        dlclose(lib);
        return NULL;
    }
    memcpy(&get, &sym, sizeof get); /* POSIX: a symbol's address converts to a function pointer */
    table = get();
    if (!table || *(const int *)table != abi) {
        snprintf(why + used, cap - used, "%s%s: built for another mgt (interface %d, this one %d); rebuild it with `%s`", used ? "; " : "", path,
                 table ? *(const int *)table : -1, abi, target);
        dlclose(lib);
        return NULL;
    }
    return table; /* kept open for the life of the process */
}
/* the library `file` at $env, else build/<file> beside the program (the source tree), <file> beside
   it, ../lib/mgt/<file> (`ninja install`), then on the loader's path (a bundle's run path); try(path)
   checks what it found */
static const void *mgt__dl_search(const char *env_name, const char *file, const void *(*try_path)(const char *path, char *why, size_t cap),
                                  char *tried, size_t cap) {
    char exe[1024], dir[1024], path[1200], *slash;
    const char *env = getenv(env_name);
    const void *api = NULL;
    ssize_t n;
    if (env && env[0]) return try_path(env, tried, cap);
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    mgt__strlcpy(dir, exe, sizeof dir);
    slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    snprintf(path, sizeof path, "%s/build/%s", dir, file);
    if (!access(path, F_OK)) api = try_path(path, tried, cap);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!api && !access(path, F_OK)) api = try_path(path, tried, cap);
    snprintf(path, sizeof path, "%s/../lib/mgt/%s", dir, file);
    if (!api && !access(path, F_OK)) api = try_path(path, tried, cap);
    if (!api) api = try_path(file, tried, cap);
    return api;
}

/* src/plugin.c - opening mgt's libraries at run time (the CUDA backend's, MPI's, oneDNN's): where they are looked for, and their interface version */
/* one of mgt's libraries: the variable that names its path, its file, the getter of its table
   (whose first int is the interface version, abi), what it is, and the build target that makes it */
typedef struct mgt__dl_lib { const char *env, *file, *symbol, *kind, *target; int abi; } mgt__dl_lib;

/* lib's table: dlopen(path), then its getter, whose table must have this mgt's version; NULL with
   why appended to `why` */
static const void *mgt__dl_table(const mgt__dl_lib *lib, const char *path, char *why, size_t cap) {
    typedef const void *(*get_fn)(void);
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL), *sym;
    const void *table;
    get_fn get;
    size_t used = strlen(why);
    if (!handle) {
        const char *e = dlerror();
        snprintf(why + used, cap - used, "%s%s", used ? "; " : "", e ? e : path);
        return NULL;
    }
    sym = dlsym(handle, lib->symbol);
    if (!sym) {
        snprintf(why + used, cap - used, "%s%s: not an mgt %s library (no %s)", used ? "; " : "", path, lib->kind, lib->symbol);
        dlclose(handle);
        return NULL;
    }
    memcpy(&get, &sym, sizeof get); /* POSIX: a symbol's address converts to a function pointer */
    table = get();
    if (!table || *(const int *)table != lib->abi) {
        snprintf(why + used, cap - used, "%s%s: built for another mgt (interface %d, this one %d); rebuild it with `%s`", used ? "; " : "", path,
                 table ? *(const int *)table : -1, lib->abi, lib->target);
        dlclose(handle);
        return NULL;
    }
    return table; /* kept open for the life of the process */
}
/* lib's table from the file at $env, else build/<file> beside the program (the source tree), <file>
   beside it, ../lib/mgt/<file> (`ninja install`), then on the loader's path (a bundle's run path);
   what each place lacked is appended to `tried` */
static const void *mgt__dl_search(const mgt__dl_lib *lib, char *tried, size_t cap) {
    char exe[1024], dir[1024], path[1200], *slash;
    const char *env = getenv(lib->env), *file = lib->file;
    const void *api = NULL;
    ssize_t n;
    if (env && env[0]) return mgt__dl_table(lib, env, tried, cap);
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    mgt__strlcpy(dir, exe, sizeof dir);
    slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    snprintf(path, sizeof path, "%s/build/%s", dir, file);
    if (!access(path, F_OK)) api = mgt__dl_table(lib, path, tried, cap);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!api && !access(path, F_OK)) api = mgt__dl_table(lib, path, tried, cap);
    snprintf(path, sizeof path, "%s/../lib/mgt/%s", dir, file);
    if (!api && !access(path, F_OK)) api = mgt__dl_table(lib, path, tried, cap);
    if (!api) api = mgt__dl_table(lib, file, tried, cap);
    return api;
}

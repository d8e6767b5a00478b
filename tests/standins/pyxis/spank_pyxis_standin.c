/*
 * gpuforge test stand-in for pyxis (spank_pyxis.so): a SPANK plugin named pyxis that accepts pyxis's
 * plugstack arguments and registers its srun/sbatch options, so `srun --help` lists them and
 * `srun --container-image=IMAGE` reaches a plugin loaded by srun on the login node and by slurmstepd on
 * the compute node. It starts no container: in the job step it records the image it received, in the
 * step's environment (PYXIS_STANDIN_IMAGE) and in RUNTIME_PATH/standin-<job>.<step>, for the test to read.
 *
 * Compiled in the test session against Debian's libslurm-dev (slurm/spank.h of the Slurm release the
 * test machines run): Slurm loads a SPANK plugin only into the release it was compiled against.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1)

static char image[4096];
static char runtime_path[1024] = "/run/pyxis";
static int sbatch_support = 1;

static int option_image(int val, const char *optarg, int remote)
{
	if (optarg == NULL || optarg[0] == '\0') {
		slurm_error("pyxis: --container-image: an image is required");
		return (-1);
	}
	snprintf(image, sizeof(image), "%s", optarg);
	return (0);
}

static int option_accepted(int val, const char *optarg, int remote)
{
	return (0);
}

/* pyxis's options (its README, "Usage"): name, argument, takes an argument. */
static struct spank_option options[] = {
	{ "container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
	  "[pyxis] the image to use for the container filesystem (gpuforge test stand-in)", 1, 0, option_image },
	{ "container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]", "[pyxis] bind mount[s] inside the container", 1, 0,
	  option_accepted },
	{ "container-workdir", "PATH", "[pyxis] working directory inside the container", 1, 0, option_accepted },
	{ "container-name", "NAME", "[pyxis] name to use for saving and loading the container", 1, 0,
	  option_accepted },
	{ "container-save", "PATH", "[pyxis] save the container state to a squashfs file", 1, 0, option_accepted },
	{ "container-mount-home", NULL, "[pyxis] bind mount the user's home directory", 0, 1, option_accepted },
	{ "no-container-mount-home", NULL, "[pyxis] do not bind mount the user's home directory", 0, 0,
	  option_accepted },
	{ "container-remap-root", NULL, "[pyxis] ask to be remapped to root inside the container", 0, 1,
	  option_accepted },
	{ "no-container-remap-root", NULL, "[pyxis] do not remap to root inside the container", 0, 0,
	  option_accepted },
	{ "container-entrypoint", NULL, "[pyxis] execute the entrypoint from the container image", 0, 1,
	  option_accepted },
	{ "no-container-entrypoint", NULL, "[pyxis] do not execute the entrypoint from the container image", 0, 0,
	  option_accepted },
	{ "container-entrypoint-log", NULL, "[pyxis] print the output of the entrypoint script", 0, 1,
	  option_accepted },
	{ "container-writable", NULL, "[pyxis] make the container filesystem writable", 0, 1, option_accepted },
	{ "container-readonly", NULL, "[pyxis] make the container filesystem read-only", 0, 0, option_accepted },
	{ "container-env", "NAME[,NAME...]", "[pyxis] names of environment variables to override", 1, 0,
	  option_accepted },
	SPANK_OPTIONS_TABLE_END
};

static int is_bool(const char *value)
{
	const char *accepted[] = { "1", "true", "yes", "y", "0", "false", "no", "n", NULL };

	for (int i = 0; accepted[i] != NULL; ++i)
		if (strcmp(value, accepted[i]) == 0)
			return (1);
	return (0);
}

static int is_true(const char *value)
{
	return (strcmp(value, "1") == 0 || strcmp(value, "true") == 0 || strcmp(value, "yes") == 0 ||
		strcmp(value, "y") == 0);
}

/* The plugstack arguments pyxis knows; anything else fails the plugin, as pyxis does. */
static int parse_arguments(int ac, char **av)
{
	const char *bools[] = { "execute_entrypoint=", "sbatch_support=", "use_enroot_load=", "use_squashfuse=", NULL };

	for (int i = 0; i < ac; ++i) {
		int known = 0;

		if (strncmp(av[i], "runtime_path=", 13) == 0) {
			snprintf(runtime_path, sizeof(runtime_path), "%s", av[i] + 13);
			continue;
		}
		if (strncmp(av[i], "importer=", 9) == 0)
			continue;
		if (strncmp(av[i], "container_scope=", 16) == 0) {
			if (strcmp(av[i] + 16, "job") != 0 && strcmp(av[i] + 16, "global") != 0) {
				slurm_error("pyxis: container_scope: invalid value: %s", av[i] + 16);
				return (-1);
			}
			continue;
		}
		for (int b = 0; bools[b] != NULL; ++b) {
			size_t len = strlen(bools[b]);

			if (strncmp(av[i], bools[b], len) == 0) {
				if (!is_bool(av[i] + len)) {
					slurm_error("pyxis: %.*s: invalid value: %s", (int)(len - 1), bools[b], av[i] + len);
					return (-1);
				}
				if (strcmp(bools[b], "sbatch_support=") == 0)
					sbatch_support = is_true(av[i] + len);
				known = 1;
			}
		}
		if (!known) {
			slurm_error("pyxis: unknown configuration option: %s", av[i]);
			return (-1);
		}
	}
	return (0);
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t context = spank_context();

	if (parse_arguments(ac, av) != 0)
		return (-1);
	if (context == S_CTX_ALLOCATOR && !sbatch_support)
		return (0);
	if (context == S_CTX_LOCAL || context == S_CTX_ALLOCATOR || context == S_CTX_REMOTE) {
		for (int i = 0; options[i].name != NULL; ++i)
			if (spank_option_register(sp, &options[i]) != ESPANK_SUCCESS) {
				slurm_error("pyxis: could not register --%s", options[i].name);
				return (-1);
			}
	}
	if (context == S_CTX_REMOTE && mkdir(runtime_path, 0755) != 0 && errno != EEXIST) {
		slurm_error("pyxis: cannot create %s: %m", runtime_path);
		return (-1);
	}
	return (0);
}

/* In slurmstepd, as root, once the step's options are known: the record the test reads. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	uint32_t job = 0, step = 0;
	char path[2048];
	FILE *record;

	if (spank_context() != S_CTX_REMOTE || image[0] == '\0')
		return (0);
	spank_get_item(sp, S_JOB_ID, &job);
	spank_get_item(sp, S_JOB_STEPID, &step);
	snprintf(path, sizeof(path), "%s/standin-%u.%u", runtime_path, job, step);
	record = fopen(path, "w");
	if (record == NULL) {
		slurm_error("pyxis: cannot write %s: %m", path);
		return (-1);
	}
	fprintf(record, "%s\n", image);
	fclose(record);
	slurm_info("pyxis: gpuforge test stand-in: job %u step %u asked for image %s (no container started)",
		   job, step, image);
	return (spank_setenv(sp, "PYXIS_STANDIN_IMAGE", image, 1) == ESPANK_SUCCESS ? 0 : -1);
}

/* An AddressSanitizer build of a small KFD client: opens /dev/kfd, asks GET_VERSION, maps a
 * file, and frees everything. Run under `kfd-emu run` with ASAN_OPTIONS=detect_leaks=0
 * (LeakSanitizer ptraces the program's threads at exit, which a traced program cannot).
 * Prints "ASAN PROBE OK <major>.<minor>" and exits 0 when every step worked. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

struct kfd_ioctl_get_version_args {
	uint32_t major_version;
	uint32_t minor_version;
};

/* AMDKFD_IOC_GET_VERSION: _IOR('K', 0x01, struct kfd_ioctl_get_version_args). */
#define AMDKFD_IOC_GET_VERSION _IOR('K', 0x01, struct kfd_ioctl_get_version_args)

int main(void)
{
	struct kfd_ioctl_get_version_args version;
	char *heap = malloc(64);
	int kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
	int self = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	void *map;

	if (!heap || kfd < 0 || self < 0) {
		perror("open");
		return 2;
	}
	memset(&version, 0, sizeof(version));
	if (ioctl(kfd, AMDKFD_IOC_GET_VERSION, &version) != 0) {
		perror("GET_VERSION");
		return 3;
	}
	map = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, self, 0);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 4;
	}
	snprintf(heap, 64, "%u.%u", version.major_version, version.minor_version);
	printf("ASAN PROBE OK %s\n", heap);
	munmap(map, 4096);
	close(self);
	close(kfd);
	free(heap);
	return 0;
}
